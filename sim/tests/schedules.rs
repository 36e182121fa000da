//! Runs seeded schedules through the simulator and fails on any violation.
//!
//! `-- --schedules N` (default 20) runs seeds `--first` (default 0) to first + N;
//! `-- --seed N` runs one seed and prints its schedule and what it came to. The last
//! line: `sim: schedules=N violations=V calls=C lost=L`. `--no-stall-detection` puts
//! back the consumers' blindness to a paused host (to see the simulator find it);
//! `--trace` writes the framework's log (`RUST_LOG`) to stderr in simulated time.

use std::sync::Arc;
use std::time::Instant;

use lossless_rpc_sim::ledger::CallEnd;
use lossless_rpc_sim::{Overrides, RunOutcome, Schedule, run};

fn arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|arg| arg == name)?;
    args.get(at + 1)?.parse().ok()
}

fn main() {
    let (first, count, verbose) = match arg("--seed") {
        Some(seed) => (seed, 1, true),
        None => (
            arg("--first").unwrap_or(0),
            arg("--schedules").unwrap_or(20),
            false,
        ),
    };
    if flag("--trace") {
        trace_to_stderr();
    }
    let mut overrides = Overrides::default();
    if flag("--no-stall-detection") {
        overrides.consumer = Some(Arc::new(|config: &mut rpc::Config| {
            config.consumer.directory.stall_detection = false;
        }));
    }
    let began = Instant::now();
    let (mut calls, mut lost, mut failing) = (0usize, 0usize, Vec::new());
    for seed in first..first + count {
        let schedule = Schedule::draw(seed);
        if verbose {
            print!("{schedule}");
        }
        let outcome = match run(schedule, &overrides) {
            Ok(outcome) => outcome,
            Err(error) => {
                println!("seed {seed}: the simulation failed: {error}");
                failing.push(seed);
                continue;
            }
        };
        let ended = &outcome.entries.calls;
        calls += ended.len();
        lost += ended
            .values()
            .filter(|call| !matches!(call.ended, Some((_, CallEnd::Answered(_)))))
            .count();
        let violations = &outcome.violations;
        if verbose || !violations.is_empty() {
            println!(
                "seed {seed}: {} calls, {} violations",
                ended.len(),
                violations.len()
            );
        }
        if verbose {
            describe(&outcome);
        }
        if !violations.is_empty() {
            if !verbose {
                print!("{}", outcome.schedule);
            }
            for violation in violations.iter().take(10) {
                println!("  {violation}");
            }
            println!("  replay: bash scripts/sim.sh --seed {seed}");
            failing.push(seed);
        }
    }
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "sim: {:.1} schedules/s over {seconds:.0} s; failing seeds: {failing:?}",
        count as f64 / seconds
    );
    println!(
        "sim: schedules={count} violations={} calls={calls} lost={lost}",
        failing.len()
    );
    if !failing.is_empty() {
        std::process::exit(1);
    }
}

fn flag(name: &str) -> bool {
    std::env::args().any(|arg| arg == name)
}

/// What one run came to, beyond its violations: start failures, graceful stops, the
/// directories at the end, and for each event the calls made during it.
fn describe(outcome: &RunOutcome) {
    let entries = &outcome.entries;
    println!("  start failures: {:?}", entries.start_failures);
    let stops: Vec<_> = entries
        .stops
        .iter()
        .map(|stop| (&stop.provider, stop.at, stop.forced))
        .collect();
    println!("  graceful stops: {stops:?}");
    println!("  directories at the end: {:?}", entries.directories);
    for event in &outcome.schedule.events {
        let host = event.target.host();
        let made_during = entries
            .calls
            .values()
            .filter(|call| call.started >= event.at && call.started < event.end());
        let (mut answered, mut failed) = (0, 0);
        for call in made_during {
            match &call.ended {
                Some((_, CallEnd::Answered(by))) if *by == host => answered += 1,
                Some((_, CallEnd::Failed(..))) => failed += 1,
                _ => {}
            }
        }
        println!(
            "  during {:?} of {host}: {answered} calls made then answered by it, {failed} made then failed",
            event.kind
        );
    }
}

/// `--trace`: the framework's own log (RUST_LOG, default warnings), each line with the
/// simulated time.
fn trace_to_stderr() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_timer(SimTime)
        .with_writer(std::io::stderr)
        .init();
}

/// Log lines stamped with the simulated time.
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:>9.3}s", lossless_rpc_sim::ledger::now().as_secs_f64())
    }
}
