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

use tokio::time::Instant;

/// Resolution of the update stamp: 64 µs, so a `u32` spans three days (a stamp older than
/// that wraps; by then any estimate has long decayed to nothing anyway).
const STAMP_UNIT_NS: u64 = 64_000;

/// One instance's latency estimate.
///
/// The estimate (ns, as `f32` bits) and the time of its last update share one atomic
/// word, so a pick reads it with one load and a call records it with one
/// compare-and-swap: no lock, one cache line written per call.
#[derive(Debug)]
pub(crate) struct PeakEwma {
    origin: Instant,
    decay_ns: f64,
    packed: AtomicU64,
}

impl PeakEwma {
    pub(crate) fn new(initial: Duration, decay: Duration, now: Instant) -> Self {
        Self {
            origin: now,
            decay_ns: decay.as_nanos().max(1) as f64,
            packed: AtomicU64::new(pack(initial.as_nanos() as f32, 0)),
        }
    }

    fn units_since_origin(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.origin).as_nanos() as u64 / STAMP_UNIT_NS) as u32
    }

    fn decay(&self, estimate: f32, stamp: u32, now: u32) -> f64 {
        let elapsed_ns = f64::from(now.wrapping_sub(stamp)) * STAMP_UNIT_NS as f64;
        f64::from(estimate) * (-elapsed_ns / self.decay_ns).exp()
    }

    /// The estimate at `now`, in nanoseconds, decayed for the time since it was updated.
    pub(crate) fn estimate_ns(&self, now: Instant) -> f64 {
        let (estimate, stamp) = unpack(self.packed.load(Ordering::Relaxed));
        self.decay(estimate, stamp, self.units_since_origin(now))
    }

    /// Records one observed latency at `now`.
    pub(crate) fn observe(&self, rtt: Duration, now: Instant) {
        let rtt = rtt.as_nanos() as f64;
        let at = self.units_since_origin(now);
        let _ = self
            .packed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
                let (estimate, stamp) = unpack(packed);
                let estimate = f64::from(estimate);
                let next = if rtt > estimate {
                    rtt
                } else {
                    let weight = self.decay(1.0, stamp, at);
                    estimate * weight + rtt * (1.0 - weight)
                };
                Some(pack(next as f32, at))
            });
    }
}

fn pack(estimate_ns: f32, stamp: u32) -> u64 {
    (u64::from(estimate_ns.to_bits()) << 32) | u64::from(stamp)
}

fn unpack(packed: u64) -> (f32, u32) {
    (f32::from_bits((packed >> 32) as u32), packed as u32)
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
