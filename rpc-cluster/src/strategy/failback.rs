//! Failback: swallow the failure now, retry it later in the background.

use rand::rngs::SmallRng;

use super::{CallFacts, Decision, Failed, Strategy};

/// Failback: one attempt; on failure the caller gets an empty response at once and the
/// request is queued and retried in the background — by default every 5 s, up to 3
/// times, at most 1024 requests waiting (beyond that a new one is dropped and logged);
/// see `failback` in the reference's configuration. For notifications that must
/// eventually arrive but need not hold up the caller. A request whose body cannot be
/// replayed is not queued.
#[derive(Debug)]
pub(crate) struct Failback;

impl Strategy for Failback {
    fn on_failure(&self, _failed: Failed, _facts: &CallFacts, _rng: &mut SmallRng) -> Decision {
        Decision::Swallow { retry_later: true }
    }
}
