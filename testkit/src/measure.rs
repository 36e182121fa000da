//! Latency and throughput figures: the one histogram shape every measurement records
//! into (the load generator's record and the benchmarks), and what is read from it.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency a histogram holds: 120 s, in µs. Longer than any call timeout the
/// examples and benchmarks use, so a stalled call is recorded, not dropped.
pub const MAX_LATENCY_US: u64 = 120_000_000;

/// A latency histogram in microseconds, 1 µs to [`MAX_LATENCY_US`], 3 significant
/// digits (HdrHistogram: a value is kept to within 0.1 %). Record latencies as
/// `latency.as_micros().max(1)`; a value beyond the bound is refused by
/// `Histogram::record`.
pub fn latency_histogram() -> Histogram<u64> {
    // Constant, valid bounds (low ≥ 1, high ≥ 2 × low, 3 digits ≤ 5): never fails.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// Throughput and latency of one measured run.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    /// Requests per second.
    pub qps: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile latency, µs.
    pub p99_us: u64,
}

impl Measured {
    /// From a histogram of the requests measured over `elapsed` (one value per
    /// request).
    pub fn new(histogram: &Histogram<u64>, elapsed: Duration) -> Self {
        Self {
            qps: histogram.len() as f64 / elapsed.as_secs_f64(),
            p50_us: histogram.value_at_quantile(0.5),
            p99_us: histogram.value_at_quantile(0.99),
        }
    }
}

/// The median of `values` (sorted copy; the middle one, or the lower middle); 0 for no
/// values.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .get((sorted.len().max(1) - 1) / 2)
        .copied()
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_takes_the_lower_middle() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.0);
    }

    #[test]
    fn the_histogram_holds_a_two_minute_call() {
        let mut histogram = latency_histogram();
        assert!(histogram.record(MAX_LATENCY_US).is_ok());
        assert!(histogram.record(1).is_ok());
    }
}
