//! Peak-EWMA latency estimate of one instance, for P2C.
//!
//! The estimate jumps up to any latency above it at once (the *peak*), and otherwise
//! moves toward observed latencies with an exponential weight that depends on the time
//! since the last observation. It also decays toward zero while nothing is observed, so
//! an instance that was slow long ago gets tried again. This is the estimator of
//! Finagle's and tower's P2C balancers (tower `load::PeakEwma`), written here because
//! ours must also count failures as latency (a failed call is recorded as at least the
//! failure penalty, so an instance that fails fast never looks fast) and must be read on
//! the pick path without taking a lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// One instance's latency estimate.
#[derive(Debug)]
pub(crate) struct PeakEwma {
    origin: Instant,
    decay_ns: f64,
    /// Estimate in ns (f64 bits) and the time of its last update (ns after `origin`),
    /// readable without the lock; written only under `update`.
    estimate: AtomicU64,
    stamp: AtomicU64,
    update: Mutex<()>,
}

impl PeakEwma {
    pub(crate) fn new(initial: Duration, decay: Duration, now: Instant) -> Self {
        Self {
            origin: now,
            decay_ns: decay.as_nanos().max(1) as f64,
            estimate: AtomicU64::new((initial.as_nanos() as f64).to_bits()),
            stamp: AtomicU64::new(0),
            update: Mutex::new(()),
        }
    }

    fn since_origin(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// The estimate at `now`, in nanoseconds, decayed for the time since it was updated.
    pub(crate) fn estimate_ns(&self, now: Instant) -> f64 {
        let estimate = f64::from_bits(self.estimate.load(Ordering::Relaxed));
        let stamp = self.stamp.load(Ordering::Relaxed);
        let elapsed = self.since_origin(now).saturating_sub(stamp) as f64;
        estimate * (-elapsed / self.decay_ns).exp()
    }

    /// Records one observed latency at `now`.
    pub(crate) fn observe(&self, rtt: Duration, now: Instant) {
        let _update = self.update.lock();
        let rtt = rtt.as_nanos() as f64;
        let estimate = f64::from_bits(self.estimate.load(Ordering::Relaxed));
        let stamp = self.stamp.load(Ordering::Relaxed);
        let at = self.since_origin(now);
        let next = if rtt > estimate {
            rtt
        } else {
            let elapsed = at.saturating_sub(stamp) as f64;
            let weight = (-elapsed / self.decay_ns).exp();
            estimate * weight + rtt * (1.0 - weight)
        };
        self.estimate.store(next.to_bits(), Ordering::Relaxed);
        self.stamp.store(at, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn jumps_to_peaks_and_eases_down() {
        let now = Instant::now();
        let ewma = PeakEwma::new(ms(1), Duration::from_secs(10), now);
        ewma.observe(ms(50), now);
        assert_eq!(ewma.estimate_ns(now), 50e6);
        for i in 1..=100 {
            ewma.observe(ms(1), now + ms(100 * i));
        }
        let later = now + ms(10_000);
        let estimate = ewma.estimate_ns(later);
        assert!(estimate < 25e6, "eased toward 1 ms: {estimate}");
        assert!(estimate > 1e6, "but not instantly: {estimate}");
    }

    #[tokio::test(start_paused = true)]
    async fn decays_while_idle() {
        let now = Instant::now();
        let ewma = PeakEwma::new(ms(30), Duration::from_secs(10), now);
        let estimate = ewma.estimate_ns(now + Duration::from_secs(10));
        assert!(
            (estimate - 30e6 / std::f64::consts::E).abs() < 1e3,
            "{estimate}"
        );
    }
}
