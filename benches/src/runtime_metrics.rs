//! tokio's runtime metrics per request of a profile run, for telling scheduling apart
//! between two stacks: tasks spawned, parks, steals, polls and schedules on each worker.
//! Most of them are tokio's unstable metrics, so the line prints only in a build with
//! `RUSTFLAGS="--cfg tokio_unstable"` (use another `CARGO_TARGET_DIR`, or every crate
//! builds again twice); otherwise nothing.

/// Prints `runtime <name>: …` with the current runtime's counters since it started, each
/// divided by `requests` (start-up included: negligible over a run of seconds).
#[cfg(tokio_unstable)]
pub fn print_per_request(name: &str, requests: f64) {
    let metrics = tokio::runtime::Handle::current().metrics();
    let per = |count: u64| count as f64 / requests;
    let mut line = format!(
        "runtime {name}: per request: tasks spawned {:.2}, remote schedules {:.2}",
        per(metrics.spawned_tasks_count()),
        per(metrics.remote_schedule_count()),
    );
    for worker in 0..metrics.num_workers() {
        line += &format!(
            "; worker {worker}: parks {:.2}, steals {:.2}, polls {:.2}, local schedules {:.2}, busy {:.1} µs",
            per(metrics.worker_park_count(worker)),
            per(metrics.worker_steal_count(worker)),
            per(metrics.worker_poll_count(worker)),
            per(metrics.worker_local_schedule_count(worker)),
            metrics.worker_total_busy_duration(worker).as_secs_f64() * 1e6 / requests,
        );
    }
    println!("{line}");
}

/// Without `--cfg tokio_unstable` the counters are not there: prints nothing.
#[cfg(not(tokio_unstable))]
pub fn print_per_request(_name: &str, _requests: f64) {}
