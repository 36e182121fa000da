//! The retry budget of failover: retries may add at most `ratio` of the requests, plus
//! `min_per_second`, over a sliding window of `ttl` (Finagle's and linkerd's retry
//! budget; tower's `TpsBudget` has the same rule and the same names; configured by
//! [`RetryBudgetConfig`]). Unlike a retry *count*, a budget bounds what a
//! failing dependency can cost: when everything fails, retries stop at the budget
//! instead of multiplying the load by `1 + retries`.
//!
//! Written here rather than taken from tower because tower's budget takes a mutex on
//! every request; measured in the overhead benchmark, that lock (contended by every
//! core on every call) cost more than the rest of the budget's work. This one keeps
//! per-second counters in atomics: a deposit is one clock read and one atomic add.
//! Counts are approximate at the moment a second rolls over (a concurrent add may land
//! in a slot just being cleared), which a budget can afford.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use tokio::time::Instant;

use crate::config::{MAX_RETRY_BUDGET_TTL, RetryBudgetConfig};

/// A retry budget shared by all calls of one reference.
#[derive(Debug)]
pub(crate) struct RetryBudget {
    origin: Instant,
    ratio: f64,
    reserve: i64,
    /// The second (since `origin`) the slots were last rolled to.
    epoch: AtomicU64,
    /// Requests and retries counted in each second of the window, one slot a second.
    requests: Box<[AtomicI64]>,
    retries: Box<[AtomicI64]>,
}

impl RetryBudget {
    /// Retries may be `ratio` of the requests (0.2 = 20 %) plus `min_per_second` each
    /// second, over the last `ttl`. Values out of range (see
    /// [`RetryBudgetConfig::validate`]) are brought into it: the ratio to 0..=10, the
    /// window to 1..=60 whole seconds.
    pub(crate) fn new(config: &RetryBudgetConfig) -> Self {
        let window = config
            .ttl
            .as_secs()
            .clamp(1, MAX_RETRY_BUDGET_TTL.as_secs());
        let slots = || (0..window).map(|_| AtomicI64::new(0)).collect();
        Self {
            origin: Instant::now(),
            ratio: config.ratio.clamp(0.0, 10.0),
            reserve: i64::from(config.min_per_second).saturating_mul(window as i64),
            epoch: AtomicU64::new(0),
            requests: slots(),
            retries: slots(),
        }
    }

    /// Counts one request.
    pub(crate) fn deposit(&self) {
        let slot = self.roll();
        self.requests[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one retry from the budget; false when it is spent.
    pub(crate) fn withdraw(&self) -> bool {
        let slot = self.roll();
        let requests: i64 = self
            .requests
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum();
        let retries: i64 = self.retries.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        let allowed = self.reserve + (requests as f64 * self.ratio) as i64;
        if retries < allowed {
            self.retries[slot].fetch_add(1, Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    /// Moves the window to the current second, clearing the seconds that left it, and
    /// returns the current second's slot.
    fn roll(&self) -> usize {
        let now = Instant::now()
            .saturating_duration_since(self.origin)
            .as_secs();
        let epoch = self.epoch.load(Ordering::Acquire);
        if now > epoch
            && self
                .epoch
                .compare_exchange(epoch, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let stale = (now - epoch).min(self.window());
            for second in (now + 1 - stale)..=now {
                let slot = (second % self.window()) as usize;
                self.requests[slot].store(0, Ordering::Relaxed);
                self.retries[slot].store(0, Ordering::Relaxed);
            }
        }
        (now % self.window()) as usize
    }

    /// Seconds in the window.
    fn window(&self) -> u64 {
        self.requests.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn budget(ratio: f64, min_per_second: u32) -> RetryBudget {
        RetryBudget::new(&RetryBudgetConfig {
            ratio,
            min_per_second,
            ..RetryBudgetConfig::default()
        })
    }

    fn withdrawals(budget: &RetryBudget) -> usize {
        std::iter::from_fn(|| budget.withdraw().then_some(()))
            .take(10_000)
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn allows_the_reserve_plus_a_fifth_of_the_requests() {
        let budget = budget(0.2, 10);
        for _ in 0..500 {
            budget.deposit();
        }
        assert_eq!(withdrawals(&budget), 100 + 100);
        assert!(!budget.withdraw(), "spent");
        for _ in 0..10 {
            budget.deposit();
        }
        assert_eq!(withdrawals(&budget), 2, "new requests earn new retries");
    }

    #[tokio::test(start_paused = true)]
    async fn spent_retries_come_back_after_the_window() {
        let budget = budget(0.2, 1);
        assert_eq!(withdrawals(&budget), 10, "the reserve alone: 1/s over 10 s");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(withdrawals(&budget), 0, "still inside the window");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(withdrawals(&budget), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn old_requests_stop_earning_retries() {
        let budget = budget(0.5, 0);
        for _ in 0..100 {
            budget.deposit();
        }
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(withdrawals(&budget), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_configured_window_and_ratio_are_used() {
        let budget = RetryBudget::new(&RetryBudgetConfig {
            ratio: 1.5,
            min_per_second: 2,
            ttl: Duration::from_secs(2),
        });
        for _ in 0..10 {
            budget.deposit();
        }
        assert_eq!(
            withdrawals(&budget),
            2 * 2 + 15,
            "reserve 2/s × 2 s, plus 150 %"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            withdrawals(&budget),
            0,
            "the first second is still in the window"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            withdrawals(&budget),
            4,
            "deposits and retries rolled out: the reserve is back"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn out_of_range_settings_are_brought_into_range() {
        let budget = RetryBudget::new(&RetryBudgetConfig {
            ratio: -1.0,
            min_per_second: 1,
            ttl: Duration::ZERO,
        });
        for _ in 0..100 {
            budget.deposit();
        }
        assert_eq!(withdrawals(&budget), 1, "a one-second window, no ratio");
    }
}
