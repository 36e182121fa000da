//! The heap one consumer of the fleet holds after the roll, per instance it knows: the
//! framework's real `Application` with one reference (directory, invokers, latency
//! estimates, blacklist, connections it opened), run through the 10 000-instance roll
//! of `bash scripts/sim.sh --fleet` with every allocation counted (dhat). `bash
//! scripts/sim.sh` (without `--fleet`) prints it before the roll.
//!
//! Prints `sim-fleet-memory: instances=N heap_bytes=… per_instance_bytes=… connected=…`.
//! `-- --instances N` changes the fleet's size; a bad argument is an error (exit 2).

use std::sync::Arc;

use lossless_rpc_sim::fleet::plan::RollPlan;
use lossless_rpc_sim::fleet::{FleetSpec, consumer};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

fn main() {
    let mut spec = FleetSpec {
        consumers: 1,
        threads: 1,
        ..FleetSpec::full()
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--instances" => {
                let value = args.next().unwrap_or_default();
                spec.instances = match value.parse() {
                    Ok(n) if n > 0 => n,
                    _ => fail(&format!(
                        "--instances {value}: not a number from 1 to {}",
                        usize::MAX
                    )),
                };
                spec.batch = spec.batch.min(spec.instances);
            }
            "--nocapture" | "--quiet" | "-q" | "--show-output" => {}
            other if other.starts_with("--test-threads") || other.starts_with("--color") => {}
            other => fail(&format!("unknown argument {other}")),
        }
    }
    let _profiler = dhat::Profiler::builder().testing().build();
    // The plan (every provider's timeline and the registry's lists) is the simulation's,
    // not the consumer's: counted before the baseline.
    let plan = Arc::new(RollPlan::draw(&spec));
    let base = dhat::HeapStats::get().curr_bytes;
    let heap = || dhat::HeapStats::get().curr_bytes - base;
    let outcome = consumer::run(&plan, &spec, 0, &Arc::default(), Some(&heap));
    let (held, connected) = outcome.measured.expect("the consumer ran to its end");
    assert!(
        outcome.tally.failed.is_empty(),
        "{:?}",
        outcome.tally.failed
    );
    println!(
        "sim-fleet-memory: instances={} heap_bytes={held} per_instance_bytes={} connected={connected}",
        spec.instances,
        held / spec.instances
    );
}

fn fail(message: &str) -> ! {
    eprintln!("fleet_memory: {message}\nusage: fleet_memory [--instances N]");
    std::process::exit(2);
}
