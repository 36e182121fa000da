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
//!
//! **Idle instances come back to the fleet's level.** Decaying toward zero alone, as
//! Finagle and tower do, takes tens of seconds to bring an instance whose last answer
//! was an outlier (say 8× the usual latency) back below a busy peer's estimate; all
//! that time P2C sends it (almost) nothing, so nothing corrects the estimate, and one of
//! two equal providers gets most of the calls for seconds. So an estimate above the
//! fleet's latency (an average over the answers of every instance of the directory,
//! [`FleetLatency`]) also relaxes toward it for every round of answers the fleet gives
//! while this instance gives none (by `e` every [`RELAX_ROUNDS`] rounds): an instance
//! left out for a few rounds looks as good as the fleet's typical instance again, is
//! tried, and its real latency is learned — at once if it really is slow, since a peak
//! still counts in full. Counting rounds rather than seconds makes this the same at 10
//! calls/s as at 10 000, and for 2 instances as for 2 000. A failure's penalty is held
//! (it decays only toward zero, as before): the blacklist, not the estimate, decides
//! when a failing instance is tried again.
//!
//! This follows gRPC's weighted round-robin (gRFC A58), where an endpoint whose weight
//! is stale is given the mean weight of the others instead of its last one: an estimate
//! nobody refreshes should not keep an instance out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::fleet_latency::FleetLatency;

/// Rounds of the fleet's answers without one of this instance's over which an estimate
/// above the fleet's latency relaxes toward it by a factor `e`.
const RELAX_ROUNDS: f64 = 2.0;

/// `relax_from` after a failure's penalty: no relaxation until the next answer.
const HOLD: u64 = u64::MAX;

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
    fleet: Option<Arc<FleetLatency>>,
    /// The fleet's answer count when an answer last set the estimate ([`HOLD`] after
    /// a penalty).
    relax_from: AtomicU64,
    /// Whether an answer was ever observed (the estimate is more than the prior).
    answered: AtomicBool,
}

impl PeakEwma {
    pub(crate) fn new(initial: Duration, decay: Duration, now: Instant) -> Self {
        Self {
            origin: now,
            decay_ns: decay.as_nanos().max(1) as f64,
            packed: AtomicU64::new(pack(initial.as_nanos() as f32, 0)),
            fleet: None,
            relax_from: AtomicU64::new(0),
            answered: AtomicBool::new(false),
        }
    }

    /// An estimate that, while idle, relaxes toward `fleet`'s latency (see the module
    /// documentation).
    pub(crate) fn in_fleet(
        initial: Duration,
        decay: Duration,
        now: Instant,
        fleet: Arc<FleetLatency>,
    ) -> Self {
        Self {
            fleet: Some(fleet),
            ..Self::new(initial, decay, now)
        }
    }

    /// The stored `estimate` relaxed toward the fleet's latency for the rounds the
    /// fleet answered since it was set, if it is above it (see the module
    /// documentation); the decay toward zero comes on top.
    fn relaxed(&self, estimate: f32) -> f64 {
        let estimate = f64::from(estimate);
        let Some(fleet) = self.fleet.as_deref() else {
            return estimate;
        };
        let from = self.relax_from.load(Ordering::Relaxed);
        let level = fleet.ns();
        if from == HOLD || estimate <= level {
            return estimate;
        }
        level + (estimate - level) * (-fleet.rounds_since(from) / RELAX_ROUNDS).exp()
    }

    fn units_since_origin(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.origin).as_nanos() as u64 / STAMP_UNIT_NS) as u32
    }

    fn decay(&self, estimate: f64, stamp: u32, now: u32) -> f64 {
        let elapsed_ns = f64::from(now.wrapping_sub(stamp)) * STAMP_UNIT_NS as f64;
        estimate * (-elapsed_ns / self.decay_ns).exp()
    }

    /// The estimate at `now`, in nanoseconds, decayed for the time since it was updated.
    pub(crate) fn estimate_ns(&self, now: Instant) -> f64 {
        let (estimate, stamp) = unpack(self.packed.load(Ordering::Relaxed));
        let now = self.units_since_origin(now);
        self.decay(self.relaxed(estimate), stamp, now)
    }

    /// The estimate as the last answer left it (no decay: a bound, not a pick, reads
    /// it), once an answer was observed and unless it holds a failure's penalty
    /// (`None`): what answers took, not the prior, nor what failures cost.
    pub(crate) fn answered_ns(&self) -> Option<f64> {
        let observed = self.answered.load(Ordering::Relaxed);
        (observed && self.relax_from.load(Ordering::Relaxed) != HOLD)
            .then(|| f64::from(unpack(self.packed.load(Ordering::Relaxed)).0))
    }

    /// Records one answer's latency at `now` (into the fleet's latency too).
    pub(crate) fn observe(&self, rtt: Duration, now: Instant) {
        if let Some(fleet) = &self.fleet {
            fleet.observe(rtt);
        }
        self.update(rtt, now);
        if let Some(fleet) = &self.fleet {
            self.relax_from.store(fleet.answers(), Ordering::Relaxed);
        }
        if !self.answered.load(Ordering::Relaxed) {
            self.answered.store(true, Ordering::Relaxed);
        }
    }

    /// Records a failure as `penalty` latency at `now`, held until the next answer
    /// (not into the fleet's latency: a failure says nothing of how fast instances
    /// answer).
    pub(crate) fn observe_penalty(&self, penalty: Duration, now: Instant) {
        self.update(penalty, now);
        self.relax_from.store(HOLD, Ordering::Relaxed);
    }

    fn update(&self, rtt: Duration, now: Instant) {
        let rtt = rtt.as_nanos() as f64;
        let at = self.units_since_origin(now);
        let _ = self
            .packed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
                let (estimate, stamp) = unpack(packed);
                let estimate = self.relaxed(estimate);
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

    #[tokio::test(start_paused = true)]
    async fn an_estimate_left_out_returns_to_the_fleet_level_but_a_penalty_is_held() {
        let now = Instant::now();
        let fleet = Arc::new(FleetLatency::new(ms(1)));
        fleet.set_instances(2);
        let outlier = PeakEwma::in_fleet(ms(1), Duration::from_secs(10), now, fleet.clone());
        let failed = PeakEwma::in_fleet(ms(1), Duration::from_secs(10), now, fleet.clone());
        outlier.observe(ms(8), now);
        failed.observe_penalty(Duration::from_secs(1), now);
        assert!((outlier.estimate_ns(now) - 8e6).abs() < 1e3);
        // Its peer answers in 1 ms for 20 rounds (40 answers of a 2-instance fleet).
        for _ in 0..40 {
            fleet.observe(ms(1));
        }
        let relaxed = outlier.estimate_ns(now);
        assert!(relaxed < 1.1e6, "back near the fleet's 1 ms: {relaxed}");
        assert!((failed.estimate_ns(now) - 1e9).abs() < 1e3, "penalty held");
    }
}
