//! Shared helpers of the `rpc` benchmarks (the targets are in `benches/`). Histograms
//! and run figures come from `rpc_testkit::measure`, shared with the load generator.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod idle_peer;
pub mod plain_h2;
pub mod runtime_metrics;
pub mod shares;
pub mod stacks;

use std::future::Future;
use std::pin::Pin;
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

/// The whole number in environment variable `variable`, `default` when it is unset.
///
/// # Errors
/// A value that is not a whole number, or is below `least`, said with the variable and
/// what it takes.
pub fn env_at_least(variable: &str, default: u64, least: u64) -> Result<u64, String> {
    let Ok(value) = std::env::var(variable) else {
        return Ok(default);
    };
    match value.trim().parse::<u64>() {
        Ok(number) if number >= least => Ok(number),
        _ => Err(format!(
            "{variable} takes a whole number from {least} (default {default}), not `{value}`"
        )),
    }
}

/// The comma-separated names in environment variable `variable`, each one of `known`
/// (as printed, case and all); every one of `known` when the variable is unset.
///
/// # Errors
/// A name not in `known`, or no name at all, said with the variable and the names it
/// takes.
pub fn env_names(variable: &str, known: &[&str]) -> Result<Vec<String>, String> {
    let Ok(value) = std::env::var(variable) else {
        return Ok(known.iter().map(|name| (*name).to_owned()).collect());
    };
    let names: Vec<String> = value
        .split(',')
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .collect();
    match names.iter().find(|name| !known.contains(&name.as_str())) {
        Some(unknown) => Err(format!(
            "{variable}: `{unknown}` is none of {}",
            known.join(", ")
        )),
        None if names.is_empty() => Err(format!(
            "{variable} is set but names nothing; it takes {}",
            known.join(", ")
        )),
        None => Ok(names),
    }
}

/// The one name in environment variable `variable`, one of `known`; `known[0]` when it
/// is unset.
///
/// # Errors
/// As [`env_names`], and for more than one name.
pub fn env_name(variable: &str, known: &[&str]) -> Result<String, String> {
    if std::env::var_os(variable).is_none() {
        return Ok(known[0].to_owned());
    }
    let mut names = env_names(variable, known)?;
    if names.len() > 1 {
        return Err(format!("{variable} takes one of {}", known.join(", ")));
    }
    Ok(names.remove(0))
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

/// Two stacks measured in back-to-back pairs: the median run of each and the medians of
/// the per-pair ratios (ours / baseline: qps, p50, p99).
#[derive(Clone, Copy, Debug)]
pub struct Compared {
    /// Our stack's median run.
    pub ours: Measured,
    /// The baseline's median run.
    pub baseline: Measured,
    /// Medians of the per-pair (qps, p50, p99) ratios.
    pub ratios: (f64, f64, f64),
}

/// `rounds` back-to-back pairs of runs of `ours` and `baseline` at `concurrency` calls,
/// `duration` each, the order alternating (a pair shares the machine's conditions, so
/// its ratio resists noise from other tenants).
pub async fn compare<O, B>(
    ours: O,
    baseline: B,
    concurrency: usize,
    duration: Duration,
    rounds: usize,
) -> Compared
where
    O: Fn() -> BoxedCall + Clone + Send + 'static,
    B: Fn() -> BoxedCall + Clone + Send + 'static,
{
    let (mut our_runs, mut baseline_runs, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (o, b) = if round % 2 == 0 {
            let o = drive(ours.clone(), concurrency, duration).await;
            (o, drive(baseline.clone(), concurrency, duration).await)
        } else {
            let b = drive(baseline.clone(), concurrency, duration).await;
            (drive(ours.clone(), concurrency, duration).await, b)
        };
        pairs.push(ratios(&o, &b));
        our_runs.push(o);
        baseline_runs.push(b);
    }
    Compared {
        ours: median_run(&our_runs),
        baseline: median_run(&baseline_runs),
        ratios: median_of(&pairs),
    }
}

/// One call of a stack, boxed so that the stacks a benchmark compares share one type.
pub type BoxedCall = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `(qps, p50, p99)` of `a` divided by those of `b`.
pub fn ratios(a: &Measured, b: &Measured) -> (f64, f64, f64) {
    (
        a.qps / b.qps,
        a.p50_us as f64 / b.p50_us as f64,
        a.p99_us as f64 / b.p99_us as f64,
    )
}

/// The median of each figure of `runs`, each on its own (a summary row, not a run).
pub fn median_run(runs: &[Measured]) -> Measured {
    let each = |pick: fn(&Measured) -> f64| {
        rpc_testkit::measure::median(&runs.iter().map(pick).collect::<Vec<_>>())
    };
    Measured {
        qps: each(|m| m.qps),
        p50_us: each(|m| m.p50_us as f64) as u64,
        p99_us: each(|m| m.p99_us as f64) as u64,
    }
}

/// CPU time this process has used (user + system), from getrusage(2); zero if it
/// cannot be read.
pub fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let micros = |time: nix::sys::time::TimeVal| {
        Duration::from_secs(time.tv_sec() as u64) + Duration::from_micros(time.tv_usec() as u64)
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// Runs `call` alone at `concurrency` calls for `duration` (for a profiler or
/// `benches/instructions.sh`) and prints the requests made, the run's figures and the
/// process's CPU time per request, as `<name> alone at <n> calls: <r> requests, ...`.
pub async fn profile<C, F>(name: &str, call: C, concurrency: usize, duration: Duration)
where
    C: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let cpu_before = cpu_time();
    let measured = drive(call, concurrency, duration).await;
    let requests = measured.qps * duration.as_secs_f64();
    let cpu_us = (cpu_time() - cpu_before).as_secs_f64() * 1e6 / requests;
    println!(
        "{name} alone at {concurrency} calls: {requests:.0} requests, {measured:?}, CPU {cpu_us:.1} µs per request"
    );
    runtime_metrics::print_per_request(name, requests);
}

/// The median of each of the three figures of `triples` (the per-run ratios of
/// [`ratios`]).
pub fn median_of(triples: &[(f64, f64, f64)]) -> (f64, f64, f64) {
    let each = |pick: fn(&(f64, f64, f64)) -> f64| {
        rpc_testkit::measure::median(&triples.iter().map(pick).collect::<Vec<_>>())
    };
    (each(|t| t.0), each(|t| t.1), each(|t| t.2))
}

/// Tracing as a service runs it in production: a subscriber logging at INFO (here to
/// nowhere), so the DEBUG call and attempt spans stop at their interest check.
///
/// `BENCH_TRACE=h2=debug` (an `EnvFilter` directive) logs what it selects instead, to
/// the file `BENCH_TRACE_FILE` (default `bench-trace.log` in the working directory,
/// which `cargo bench` makes the bench's package directory), and says so on stderr:
/// e.g. h2's `send frame=Data` and `received frame=Data` events, to count the frames
/// a profile run's calls take. Exits 2 when the directive is empty or malformed, or the
/// file cannot be made. As `EnvFilter` reads directives, a word that is no level names a
/// target (`BENCH_TRACE=h2:debug` selects a target of that name): an empty file after a
/// run means the directive selected nothing.
pub fn trace_as_in_production() {
    if let Ok(directive) = std::env::var("BENCH_TRACE") {
        return trace_to_file(&directive);
    }
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::sink)
        .init();
}

/// The subscriber of `BENCH_TRACE` (see [`trace_as_in_production`]).
fn trace_to_file(directive: &str) {
    let path = std::env::var("BENCH_TRACE_FILE").unwrap_or_else(|_| "bench-trace.log".into());
    if directive.trim().is_empty() {
        eprintln!("BENCH_TRACE is set but empty: give a directive such as h2=debug");
        std::process::exit(2)
    }
    let filter = tracing_subscriber::EnvFilter::try_new(directive).unwrap_or_else(|error| {
        eprintln!("BENCH_TRACE: `{directive}`: {error}");
        std::process::exit(2)
    });
    let file = std::fs::File::create(&path).unwrap_or_else(|error| {
        eprintln!("BENCH_TRACE_FILE: {path}: {error}");
        std::process::exit(2)
    });
    eprintln!("BENCH_TRACE: `{directive}` to {path}");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .init();
}
