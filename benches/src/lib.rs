//! Shared helpers of the `rpc` benchmarks (the targets are in `benches/`). Histograms
//! and run figures come from `rpc_testkit::measure`, shared with the load generator.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::time::Duration;

use rpc_testkit::measure::{Measured, latency_histogram};
use tokio::time::Instant;

/// The positive integer in environment variable `name`, or `default` when it is unset,
/// not a number or 0.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .filter(|value| *value > 0)
        .unwrap_or(default)
}

/// `concurrency` tasks calling `call` in a loop (closed loop) for `duration`; the
/// latencies of every call and the rate they were made at.
pub async fn drive<C, F>(call: C, concurrency: usize, duration: Duration) -> Measured
where
    C: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = latency_histogram();
            while Instant::now() < deadline {
                let sent = Instant::now();
                call().await;
                // A call longer than the histogram's bound (120 s) is left out.
                let _ = latencies.record(sent.elapsed().as_micros().max(1) as u64);
            }
            latencies
        }));
    }
    let mut all = latency_histogram();
    for task in tasks {
        if let Ok(latencies) = task.await {
            let _ = all.add(latencies);
        }
    }
    Measured::new(&all, started.elapsed())
}
