//! Failover: try another instance, but only when that cannot run the request twice.

use std::time::Duration;

use rand::RngExt;
use rand::rngs::SmallRng;

use crate::classify::FailureKind;

use super::{CallFacts, Decision, Failed, Plan, Strategy};

/// Failover (the default). Each attempt goes to an instance not yet tried in this call,
/// at most `1 + retries` attempts. A failed attempt is retried when the request
/// certainly did not run (connection refused, stream refused, body never sent) — and,
/// for methods configured idempotent, also after a timeout or UNAVAILABLE. Retries draw
/// on a budget (by default at most 20 % of requests plus 10 per second, over 10 s; see
/// `retry_budget`), so a failing dependency cannot multiply its load, and wait a
/// full-jitter exponential backoff between `backoff_base` and `backoff_max`.
///
/// Unlike failover in some frameworks we studied, a timeout of a non-idempotent method
/// is never retried: such a request runs at most once.
#[derive(Debug)]
pub(crate) struct Failover {
    backoff_base: Duration,
    backoff_max: Duration,
}

impl Failover {
    /// Failover whose backoff doubles from `backoff_base` up to `backoff_max`.
    pub(crate) fn new(backoff_base: Duration, backoff_max: Duration) -> Self {
        Self {
            backoff_base,
            backoff_max,
        }
    }

    /// Full jitter: uniform in `[0, min(max, base × 2^(retry-1))]` for the `retry`-th
    /// retry (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).
    fn backoff(&self, retry: u32, rng: &mut SmallRng) -> Duration {
        let ceiling = self
            .backoff_base
            .saturating_mul(1 << retry.saturating_sub(1).min(16))
            .min(self.backoff_max);
        ceiling.mul_f64(rng.random::<f64>())
    }
}

impl Strategy for Failover {
    fn plan(&self) -> Plan {
        Plan::Balanced
    }

    fn on_failure(&self, failed: Failed, facts: &CallFacts, rng: &mut SmallRng) -> Decision {
        let Failed::Attempt(kind) = failed else {
            return Decision::Fail;
        };
        // An overload refusal reaching the strategy has had its one free re-route: the
        // fleet is overloaded, and another attempt would only add to it.
        if kind == FailureKind::Overloaded {
            return Decision::Fail;
        }
        let retries_made = facts.attempts.saturating_sub(1);
        let safe = !kind.maybe_executed() || facts.idempotent;
        if retries_made >= facts.retries_allowed || !safe || !facts.replayable {
            return Decision::Fail;
        }
        Decision::Retry {
            backoff: self.backoff(retries_made + 1, rng),
        }
    }

    fn retries(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::classify::FailureKind;

    fn facts(attempts: u32, idempotent: bool) -> CallFacts {
        CallFacts {
            attempts,
            retries_allowed: 2,
            idempotent,
            replayable: true,
        }
    }

    fn decide(failed: Failed, facts: CallFacts) -> Decision {
        let failover = Failover::new(Duration::from_millis(2), Duration::from_millis(50));
        failover.on_failure(failed, &facts, &mut SmallRng::seed_from_u64(1))
    }

    #[test]
    fn retries_only_what_cannot_run_twice_and_at_most_retries_times() {
        let not_sent = Failed::Attempt(FailureKind::NotSent);
        let timeout = Failed::Attempt(FailureKind::Timeout);
        assert!(matches!(
            decide(not_sent, facts(1, false)),
            Decision::Retry { .. }
        ));
        assert!(matches!(
            decide(not_sent, facts(2, false)),
            Decision::Retry { .. }
        ));
        assert_eq!(
            decide(not_sent, facts(3, false)),
            Decision::Fail,
            "1 + 2 attempts"
        );
        assert_eq!(decide(timeout, facts(1, false)), Decision::Fail);
        let overloaded = Failed::Attempt(FailureKind::Overloaded);
        assert_eq!(decide(overloaded, facts(1, true)), Decision::Fail);
        assert!(matches!(
            decide(timeout, facts(1, true)),
            Decision::Retry { .. }
        ));
        assert_eq!(decide(Failed::NoAttempt, facts(1, true)), Decision::Fail);
        let spent = CallFacts {
            replayable: false,
            ..facts(1, true)
        };
        assert_eq!(decide(not_sent, spent), Decision::Fail);
    }

    #[test]
    fn the_backoff_doubles_up_to_its_ceiling() {
        let failover = Failover::new(Duration::from_millis(2), Duration::from_millis(50));
        let mut rng = SmallRng::seed_from_u64(3);
        for (retry, ceiling) in [(1, 2), (2, 4), (3, 8), (5, 32), (6, 50), (40, 50)] {
            let most = (0..200)
                .map(|_| failover.backoff(retry, &mut rng))
                .max()
                .unwrap();
            assert!(
                most <= Duration::from_millis(ceiling),
                "retry {retry}: {most:?}"
            );
            assert!(
                most > Duration::from_millis(ceiling) / 2,
                "retry {retry}: {most:?}"
            );
        }
    }
}
