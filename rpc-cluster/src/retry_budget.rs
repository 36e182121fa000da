//! The retry budget of failover: retries may add at most `ratio` of the requests, plus
//! `min_per_second`, over a sliding window (Finagle's and linkerd's retry budget; tower's
//! `TpsBudget` has the same rule). Unlike a retry *count*, a budget bounds what a
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

/// Seconds in the window.
const WINDOW: usize = 10;

/// A retry budget shared by all calls of one reference.
#[derive(Debug)]
pub(crate) struct RetryBudget {
    origin: Instant,
    ratio: f64,
    reserve: i64,
    /// The second (since `origin`) the slots were last rolled to.
    epoch: AtomicU64,
    requests: [AtomicI64; WINDOW],
    retries: [AtomicI64; WINDOW],
}

impl RetryBudget {
    /// Retries may be `ratio` of the requests (0.2 = 20 %) plus `min_per_second` each
    /// second, over the last 10 s.
    pub(crate) fn new(ratio: f64, min_per_second: u32) -> Self {
        Self {
            origin: Instant::now(),
            ratio: ratio.max(0.0),
            reserve: i64::from(min_per_second) * WINDOW as i64,
            epoch: AtomicU64::new(0),
            requests: Default::default(),
            retries: Default::default(),
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
            let stale = (now - epoch).min(WINDOW as u64);
            for second in (now + 1 - stale)..=now {
                let slot = (second % WINDOW as u64) as usize;
                self.requests[slot].store(0, Ordering::Relaxed);
                self.retries[slot].store(0, Ordering::Relaxed);
            }
        }
        (now % WINDOW as u64) as usize
    }

    /// The length of the window.
    #[cfg(test)]
    fn window() -> std::time::Duration {
        std::time::Duration::from_secs(WINDOW as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn withdrawals(budget: &RetryBudget) -> usize {
        std::iter::from_fn(|| budget.withdraw().then_some(()))
            .take(10_000)
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn allows_the_reserve_plus_a_fifth_of_the_requests() {
        let budget = RetryBudget::new(0.2, 10);
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
        let budget = RetryBudget::new(0.2, 1);
        assert_eq!(withdrawals(&budget), 10, "the reserve alone: 1/s over 10 s");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(withdrawals(&budget), 0, "still inside the window");
        tokio::time::advance(RetryBudget::window()).await;
        assert_eq!(withdrawals(&budget), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn old_requests_stop_earning_retries() {
        let budget = RetryBudget::new(0.5, 0);
        for _ in 0..100 {
            budget.deposit();
        }
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(withdrawals(&budget), 0);
    }
}
