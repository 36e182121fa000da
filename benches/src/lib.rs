//! Shared helpers of the `rpc` benchmarks (the targets are in `benches/`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::time::Duration;

use hdrhistogram::Histogram;

/// A latency histogram in microseconds, 1 µs to 60 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
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
    /// From a histogram of `count` requests measured over `elapsed`.
    pub fn new(histogram: &Histogram<u64>, elapsed: Duration) -> Self {
        Self {
            qps: histogram.len() as f64 / elapsed.as_secs_f64(),
            p50_us: histogram.value_at_quantile(0.5),
            p99_us: histogram.value_at_quantile(0.99),
        }
    }
}

/// The positive integer in environment variable `name`, or `default` when it is unset,
/// not a number or 0.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .filter(|value| *value > 0)
        .unwrap_or(default)
}

/// The median of `values` (sorted copy; the middle one, or the lower middle).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .get((sorted.len().max(1) - 1) / 2)
        .copied()
        .unwrap_or(0.0)
}
