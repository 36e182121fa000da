//! Runs seeded schedules through the simulator and fails on any violation.
//!
//! `-- --schedules N` (default 20) runs seeds `--first` (default 0) to first + N;
//! `-- --seed N` runs one seed and prints its schedule and what it came to. A bad
//! argument is an error (exit 2), never a default. The last
//! line: `sim: schedules=N violations=V calls=C lost=L`. `--no-stall-detection` puts
//! back the consumers' blindness to a paused host (to see the simulator find it);
//! `--trace` writes the framework's log (`RUST_LOG`) to stderr in simulated time.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use lossless_rpc_sim::ledger::CallEnd;
use lossless_rpc_sim::schedule::Target;
use lossless_rpc_sim::{Overrides, RunOutcome, Schedule, run};

/// What the command line asks for.
struct Options {
    first: u64,
    count: u64,
    /// One seed: print its schedule and what it came to.
    verbose: bool,
    trace: bool,
    no_stall_detection: bool,
}

const USAGE: &str =
    "usage: schedules [--seed N | [--first N] [--schedules N]] [--no-stall-detection] [--trace]";

/// The options in `args`; a message naming the bad one otherwise. libtest's own flags
/// (`--nocapture`, `--quiet`, ...) are accepted and ignored, so `cargo test` passes.
fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        first: 0,
        count: 20,
        verbose: false,
        trace: false,
        no_stall_detection: false,
    };
    let (mut seed, mut range) = (None, false);
    let number = |name: &str, value: Option<String>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("{name} needs a number"))?;
        value
            .parse()
            .map_err(|_| format!("{name} {value}: not a number from 0 to {}", u64::MAX))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seed" => seed = Some(number("--seed", args.next())?),
            "--first" => {
                options.first = number("--first", args.next())?;
                range = true;
            }
            "--schedules" => {
                options.count = number("--schedules", args.next())?;
                range = true;
            }
            "--trace" => options.trace = true,
            "--no-stall-detection" => options.no_stall_detection = true,
            "--nocapture" | "--quiet" | "-q" | "--show-output" => {}
            other if other.starts_with("--test-threads") || other.starts_with("--color") => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if let Some(seed) = seed {
        if range {
            return Err("--seed runs one seed: not with --first or --schedules".into());
        }
        (options.first, options.count, options.verbose) = (seed, 1, true);
    }
    if options.count == 0 {
        return Err("--schedules 0 runs nothing".into());
    }
    if options.first.checked_add(options.count).is_none() {
        return Err(format!(
            "seeds {} + {} pass {}",
            options.first,
            options.count,
            u64::MAX
        ));
    }
    Ok(options)
}

fn main() {
    let options = parse(std::env::args().skip(1)).unwrap_or_else(|message| {
        eprintln!("schedules: {message}\n{USAGE}");
        std::process::exit(2);
    });
    let (first, count, verbose) = (options.first, options.count, options.verbose);
    if options.trace {
        trace_to_stderr();
    }
    let mut overrides = Overrides::default();
    let mut replay_flags = String::new();
    if options.no_stall_detection {
        replay_flags.push_str(" --no-stall-detection");
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
            println!("  replay: bash scripts/sim.sh --seed {seed}{replay_flags}");
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

/// What one run came to, beyond its violations: start failures, graceful stops,
/// upgrades, the directories at the end, and for each event the calls made during it.
fn describe(outcome: &RunOutcome) {
    let entries = &outcome.entries;
    println!("  start failures: {:?}", entries.start_failures);
    println!(
        "  starts retried (the registry unreachable): {:?}",
        entries.start_retries
    );
    let stops: Vec<_> = entries
        .stops
        .iter()
        .map(|stop| (&stop.provider, stop.at, stop.forced))
        .collect();
    println!("  graceful stops: {stops:?}");
    let drains: Vec<_> = entries
        .drains
        .iter()
        .map(|drain| (&drain.provider, drain.began, drain.at, drain.forced))
        .collect();
    println!("  upgrades' drains (began, ended, forced): {drains:?}");
    println!(
        "  upgrades that did not take over: {:?}",
        entries.upgrade_failures
    );
    println!("  directories at the end: {:?}", entries.directories);
    for event in &outcome.schedule.events {
        let host = event.target.host();
        let made_during: Vec<_> = entries
            .calls
            .values()
            .filter(|call| call.started >= event.at && call.started < event.end())
            .collect();
        let failed = made_during
            .iter()
            .filter(|call| matches!(&call.ended, Some((_, CallEnd::Failed(..)))))
            .count();
        let by_it = made_during
            .iter()
            .filter(|call| matches!(&call.ended, Some((_, CallEnd::Answered(by))) if *by == host))
            .count();
        let answered_by_it = match event.target {
            Target::Provider(_) => format!("{by_it} answered by {host}, "),
            Target::Consumer(_) | Target::Registry => String::new(),
        };
        println!(
            "  calls made during {:?} of {host}: {}, {answered_by_it}{failed} failed (on any provider)",
            event.kind,
            made_during.len()
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
        .with_ansi(std::io::stderr().is_terminal())
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
