//! Forking: several instances in parallel, the first success wins.

use super::{Plan, Strategy};

/// Forking: sends the request to `forks` different instances at once and returns the
/// first success (or application error); the other attempts are cancelled. If all
/// fail, the last failure is returned. For latency-critical reads; it multiplies load.
/// A request whose body cannot be replayed is sent once. Closing instances that refuse
/// are not retried here — the other forks cover the call. Only the first fork may go
/// to an ejected or closing instance (when nothing else is selectable).
#[derive(Debug)]
pub(crate) struct Forking {
    forks: usize,
}

impl Forking {
    /// Forking over `forks` instances (at least one).
    pub(crate) fn new(forks: usize) -> Self {
        Self {
            forks: forks.max(1),
        }
    }
}

impl Strategy for Forking {
    fn plan(&self) -> Plan {
        Plan::Race(self.forks)
    }
}
