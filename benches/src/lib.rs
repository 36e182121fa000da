//! Shared helpers of the `rpc` benchmarks (the targets are in `benches/`). Histograms
//! and run figures come from `rpc_testkit::measure`, shared with the load generator.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The positive integer in environment variable `name`, or `default` when it is unset,
/// not a number or 0.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .filter(|value| *value > 0)
        .unwrap_or(default)
}
