//! How fast the instances of one directory answer, as a whole: the level an idle
//! instance's latency estimate returns to (see `ewma.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Weight of one answer in the fleet's average (an EWMA over answers, not time).
const WEIGHT: f64 = 1.0 / 32.0;

/// The latency the instances of one directory answer with — an exponentially weighted
/// average over their successful answers — and how many answers they gave, counted so
/// that "this instance has not been observed for `r` rounds of the fleet" can be told
/// without reading a clock. Written with plain loads and stores where exactness does
/// not matter (a lost update among racing answers only drops one sample from an
/// average); the answer count is exact.
#[derive(Debug)]
pub(crate) struct FleetLatency {
    ns: AtomicU64,
    answers: AtomicU64,
    instances: AtomicU64,
}

impl FleetLatency {
    /// The fleet's latency before any answer: `initial`.
    pub(crate) fn new(initial: Duration) -> Self {
        Self {
            ns: AtomicU64::new((initial.as_nanos() as f64).to_bits()),
            answers: AtomicU64::new(0),
            instances: AtomicU64::new(1),
        }
    }

    /// The average, in nanoseconds.
    pub(crate) fn ns(&self) -> f64 {
        f64::from_bits(self.ns.load(Ordering::Relaxed))
    }

    /// Answers counted so far.
    pub(crate) fn answers(&self) -> u64 {
        self.answers.load(Ordering::Relaxed)
    }

    /// Rounds of the fleet (one answer per instance) since the count was `answers`.
    pub(crate) fn rounds_since(&self, answers: u64) -> f64 {
        let since = self.answers().saturating_sub(answers);
        since as f64 / self.instances.load(Ordering::Relaxed).max(1) as f64
    }

    /// Sets how many instances the directory lists.
    pub(crate) fn set_instances(&self, instances: usize) {
        self.instances.store(instances as u64, Ordering::Relaxed);
    }

    /// Adds one successful answer's latency.
    pub(crate) fn observe(&self, rtt: Duration) {
        self.answers.fetch_add(1, Ordering::Relaxed);
        let old = self.ns();
        let next = old + (rtt.as_nanos() as f64 - old) * WEIGHT;
        self.ns.store(next.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_answers_and_counts_rounds() {
        let fleet = FleetLatency::new(Duration::from_millis(1));
        fleet.set_instances(2);
        for _ in 0..200 {
            fleet.observe(Duration::from_millis(3));
        }
        assert!((fleet.ns() - 3e6).abs() < 1e4, "{}", fleet.ns());
        assert_eq!(fleet.rounds_since(100), 50.0);
    }
}
