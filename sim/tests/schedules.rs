//! Runs seeded schedules through the simulator and fails on any violation.
//!
//! `-- --schedules N` (default 20) runs seeds `--first` (default 0) to first + N;
//! `-- --seed N` runs one seed and prints its schedule and what it came to. The last
//! line: `sim: schedules=N violations=V calls=C lost=L`. `--no-stall-detection` puts
//! back the consumers' blindness to a paused host (to see the simulator find it).

use std::sync::Arc;
use std::time::Instant;

use lossless_rpc_sim::ledger::CallEnd;
use lossless_rpc_sim::{Overrides, Schedule, run};

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
    let mut overrides = Overrides::default();
    if std::env::args().any(|arg| arg == "--no-stall-detection") {
        overrides.consumer = Some(Arc::new(|config: &mut rpc::Config| {
            config.consumer.directory.stall_detection = false;
        }));
    }
    let began = Instant::now();
    let strict = std::env::args().any(|arg| arg == "--strict");
    let (mut calls, mut lost, mut failing, mut late) = (0usize, 0usize, Vec::new(), Vec::new());
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
        let (enforced, reported): (Vec<_>, Vec<_>) = outcome
            .violations
            .iter()
            .partition(|violation| strict || violation.is_enforced());
        if !reported.is_empty() {
            late.push((seed, reported.len()));
        }
        if verbose || !enforced.is_empty() {
            println!(
                "seed {seed}: {} calls, {} violations, {} reported",
                ended.len(),
                enforced.len(),
                reported.len()
            );
        }
        if verbose {
            let entries = &outcome.entries;
            println!("  start failures: {:?}", entries.start_failures);
            println!(
                "  graceful stops: {:?}",
                entries
                    .stops
                    .iter()
                    .map(|stop| (&stop.provider, stop.at, stop.forced))
                    .collect::<Vec<_>>()
            );
            println!("  directories at the end: {:?}", entries.directories);
            for event in &outcome.schedule.events {
                let host = event.target.host();
                let during = |at: std::time::Duration| at >= event.at && at < event.end();
                let answered = entries
                    .calls
                    .values()
                    .filter(|call| during(call.started))
                    .filter(|call| matches!(&call.ended, Some((_, CallEnd::Answered(by))) if *by == host))
                    .count();
                let failed = entries
                    .calls
                    .values()
                    .filter(|call| during(call.started))
                    .filter(|call| matches!(&call.ended, Some((_, CallEnd::Failed(..)))))
                    .count();
                println!(
                    "  during {:?} of {host}: {answered} calls made then answered by it, {failed} made then failed",
                    event.kind
                );
            }
        }
        if verbose {
            for violation in reported.iter().take(10) {
                println!("  reported: {violation}");
            }
        }
        if !enforced.is_empty() {
            if !verbose {
                print!("{}", outcome.schedule);
            }
            for violation in enforced.iter().take(10) {
                println!("  {violation}");
            }
            println!(
                "  replay: cargo test -p lossless-rpc-sim --release --test schedules -- --seed {seed}"
            );
            failing.push(seed);
        }
    }
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "sim: {:.1} schedules/s over {seconds:.0} s; failing seeds: {failing:?}",
        count as f64 / seconds
    );
    println!(
        "sim: open finding \"{}\" (reported, not enforced) in {} seeds: {late:?}",
        lossless_rpc_sim::invariants::LATE_CALLS,
        late.len()
    );
    println!(
        "sim: schedules={count} violations={} calls={calls} lost={lost}",
        failing.len()
    );
    if !failing.is_empty() {
        std::process::exit(1);
    }
}
