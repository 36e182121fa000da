//! A rolling deploy at fleet scale (`lossless_rpc_sim::fleet`): every call must be
//! answered, none run twice, every consumer's directory must end with the new
//! generation. Prints what the roll cost the registry and the consumers.
//!
//! Without arguments (`cargo test`) a small fleet: 500 providers behind 8 consumers.
//! `-- --full` is 10 000 behind 1 000 (`bash scripts/sim.sh` runs it); `--instances`,
//! `--consumers`, `--batch`, `--seed`, `--threads` change one figure. A bad argument is
//! an error (exit 2), a violation exit 1. The last line:
//! `sim-fleet: instances=N consumers=C lost=L roll_s=… registry_writes_per_s=…
//! watch_events_per_s=…`.

use lossless_rpc_sim::fleet::{self, FleetReport, FleetSpec};

const USAGE: &str =
    "usage: fleet [--full] [--instances N] [--consumers N] [--batch N] [--seed N] [--threads N]";

/// The fleet the command line asks for; a message naming the bad argument otherwise.
/// libtest's own flags are accepted and ignored, so `cargo test` passes.
fn parse(mut args: impl Iterator<Item = String>) -> Result<FleetSpec, String> {
    let mut spec = FleetSpec {
        instances: 500,
        consumers: 8,
        batch: 50,
        ..FleetSpec::full()
    };
    let number = |name: &str, value: Option<String>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("{name} needs a number"))?;
        value
            .parse()
            .map_err(|_| format!("{name} {value}: not a number from 0 to {}", u64::MAX))
    };
    let count = |name: &str, value: Option<String>| -> Result<usize, String> {
        let value = value.ok_or_else(|| format!("{name} needs a number"))?;
        match value.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!(
                "{name} {value}: not a number from 1 to {}",
                usize::MAX
            )),
        }
    };
    let mut batch_given = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--full" => {
                spec = FleetSpec {
                    seed: spec.seed,
                    ..FleetSpec::full()
                }
            }
            "--instances" => spec.instances = count("--instances", args.next())?,
            "--consumers" => spec.consumers = count("--consumers", args.next())?,
            "--batch" => {
                spec.batch = count("--batch", args.next())?;
                batch_given = true;
            }
            "--threads" => spec.threads = count("--threads", args.next())?,
            "--seed" => spec.seed = number("--seed", args.next())?,
            "--nocapture" | "--quiet" | "-q" | "--show-output" => {}
            other if other.starts_with("--test-threads") || other.starts_with("--color") => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    // A smaller fleet than the batch it was given by default rolls in one batch.
    if !batch_given {
        spec.batch = spec.batch.min(spec.instances);
    }
    if spec.batch > spec.instances {
        return Err(format!(
            "--batch {} is more than the {} instances",
            spec.batch, spec.instances
        ));
    }
    Ok(spec)
}

fn main() {
    let spec = parse(std::env::args().skip(1)).unwrap_or_else(|message| {
        eprintln!("fleet: {message}\n{USAGE}");
        std::process::exit(2);
    });
    let report = fleet::run(&spec);
    print_report(&spec, &report);
    if report.violated() {
        std::process::exit(1);
    }
}

fn print_report(spec: &FleetSpec, report: &FleetReport) {
    let tally = &report.tally;
    for (index, error) in &report.start_failures {
        println!("consumer {index} did not start: {error}");
    }
    for (id, status) in tally.failed.iter().take(10) {
        println!(
            "call {} of consumer {} failed: {status}",
            id & 0xffff_ffff,
            id >> 32
        );
    }
    for (index, extra, missing) in report.unconverged.iter().take(10) {
        println!(
            "consumer {index}'s directory at the end: not the new generation; held {extra:?}, missed {missing:?}"
        );
    }
    if report.violated() {
        println!(
            "  replay: cargo test -p lossless-rpc-sim --release --test fleet -- --instances {} --consumers {} --batch {} --seed {}",
            spec.instances, spec.consumers, spec.batch, spec.seed
        );
    }
    let roll_s = report.roll.as_secs_f64();
    println!(
        "fleet: seed={} batch={} calls={} executed_twice={} refused_closing={} closing_marks={} dials_refused={} pushes_per_consumer={} update_us_mean={:.0} update_us_max={:.0} unconverged={} wall_s={:.0}",
        spec.seed,
        spec.batch,
        tally.calls,
        tally.executed_twice,
        tally.refused,
        tally.closing_marks,
        tally.dials_refused,
        report.pushes,
        report.update_us.0,
        report.update_us.1,
        report.unconverged.len(),
        report.wall.as_secs_f64()
    );
    println!(
        "sim-fleet: instances={} consumers={} lost={} roll_s={roll_s:.1} registry_writes_per_s={:.0} watch_events_per_s={:.0}",
        spec.instances,
        spec.consumers,
        tally.failed.len(),
        report.registry_writes as f64 / roll_s,
        report.watch_events as f64 / roll_s
    );
}
