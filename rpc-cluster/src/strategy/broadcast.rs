//! Broadcast: every instance.

use super::{Plan, Strategy};

/// Broadcast: sends the request to every selectable instance at once (e.g. to refresh
/// caches). Any failure or application error fails the call (the first one is
/// returned); otherwise the last success is. An instance that refuses because it is
/// closing is skipped: it is leaving, and every other instance got the request.
/// A request whose body cannot be replayed goes to one instance only.
#[derive(Debug)]
pub(crate) struct Broadcast;

impl Strategy for Broadcast {
    fn plan(&self) -> Plan {
        Plan::All
    }
}
