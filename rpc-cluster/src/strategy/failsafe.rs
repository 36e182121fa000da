//! Failsafe: swallow failures.

use rand::rngs::SmallRng;

use super::{CallFacts, Decision, Failed, Strategy};

/// Failsafe: one attempt; a failure (of the call, not an application error status) is
/// logged and the caller gets an empty response with status OK — for calls whose
/// result does not matter, such as audit logging.
#[derive(Debug)]
pub(crate) struct Failsafe;

impl Strategy for Failsafe {
    fn on_failure(&self, _failed: Failed, _facts: &CallFacts, _rng: &mut SmallRng) -> Decision {
        Decision::Swallow { retry_later: false }
    }
}
