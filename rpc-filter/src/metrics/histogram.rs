//! A histogram of durations that records without a lock.
//!
//! prometheus-client's `Histogram` takes a mutex on every observation; a histogram of
//! call durations is written by every call on every core, so this one keeps one atomic
//! counter per bucket and an atomic sum in nanoseconds: an observation is two relaxed
//! atomic adds. The count is the sum of the buckets, read at scrape time, so the
//! `+Inf` bucket and `_count` always agree.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::exemplar::{BucketExemplars, CallExemplar};

/// Upper bounds of the buckets, in seconds: from 100 µs (a call on loopback takes a few
/// hundred) to 10 s, in the 1-2.5-5 steps of Prometheus' and OpenTelemetry's default
/// buckets, whose upper part (5 ms to 10 s) they are.
pub const BUCKETS_SECONDS: [f64; 16] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The same bounds in nanoseconds, compared with on every observation.
const BUCKETS_NANOS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Durations counted in the buckets of [`BUCKETS_SECONDS`] (and one for longer ones),
/// with their sum, and each bucket's latest traced call.
#[derive(Debug, Default)]
pub struct DurationHistogram {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; BUCKETS_NANOS.len() + 1],
    sum_nanos: AtomicU64,
    exemplars: BucketExemplars<{ BUCKETS_NANOS.len() + 1 }>,
}

/// A copy of a [`DurationHistogram`] in the form Prometheus encoders take.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    /// Sum of the observations, in seconds.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
    /// `(upper bound in seconds, observations in this bucket only)`, the last bound
    /// `+Inf`.
    pub buckets: Vec<(f64, u64)>,
    /// Each bucket's latest traced call, in the order of `buckets`.
    pub exemplars: Vec<Option<CallExemplar>>,
}

impl DurationHistogram {
    /// Counts one duration.
    pub fn observe(&self, duration: Duration) {
        self.observe_call(duration, None);
    }

    /// Counts one call's duration; with `trace` (its trace and span ids), the call
    /// becomes its bucket's exemplar.
    pub fn observe_call(&self, duration: Duration, trace: Option<(u128, u64)>) {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_NANOS
            .iter()
            .position(|&bound| nanos <= bound)
            .unwrap_or(BUCKETS_NANOS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        if let Some((trace_id, span_id)) = trace {
            let seconds = duration.as_secs_f64();
            self.exemplars.record(
                bucket,
                CallExemplar {
                    trace_id,
                    span_id,
                    seconds,
                },
            );
        }
    }

    /// What was observed so far.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let counts = self
            .buckets
            .each_ref()
            .map(|bucket| bucket.load(Ordering::Relaxed));
        let bounds = BUCKETS_SECONDS.iter().copied().chain([f64::INFINITY]);
        HistogramSnapshot {
            sum: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            count: counts.iter().sum(),
            buckets: bounds.zip(counts).collect(),
            exemplars: self.exemplars.snapshot(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_bound_tables_agree() {
        for (seconds, nanos) in BUCKETS_SECONDS.iter().zip(BUCKETS_NANOS) {
            assert_eq!(
                Duration::from_secs_f64(*seconds).as_nanos(),
                u128::from(nanos)
            );
        }
    }

    #[test]
    fn observations_fall_in_the_first_bucket_that_holds_them() {
        let histogram = DurationHistogram::default();
        histogram.observe(Duration::from_micros(100)); // on the bound: le="0.0001"
        histogram.observe(Duration::from_micros(300));
        histogram.observe(Duration::from_secs(60));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count, 3);
        assert_eq!(snapshot.buckets[0], (0.000_1, 1));
        assert_eq!(snapshot.buckets[2], (0.000_5, 1));
        assert_eq!(*snapshot.buckets.last().unwrap(), (f64::INFINITY, 1));
        assert!((snapshot.sum - 60.0004).abs() < 1e-9, "{}", snapshot.sum);
    }
}
