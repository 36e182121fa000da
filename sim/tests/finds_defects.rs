//! The simulator finds a defect when one is put back: with the consumers' stall
//! detection off (what the framework did before issue 35), calls keep going to a paused
//! provider's host for as long as it is paused, and a seed among the first ones whose
//! schedule pauses a host fails the "a paused host gets no new call" invariant.

use std::sync::Arc;

use lossless_rpc_sim::invariants::LATE_CALLS;
use lossless_rpc_sim::schedule::Kind;
use lossless_rpc_sim::{Overrides, Schedule, run};

/// Seeds tried before the test gives up.
const SEEDS: u64 = 20;

fn stall_detection_off() -> Overrides {
    Overrides {
        consumer: Some(Arc::new(|config: &mut rpc::Config| {
            config.consumer.directory.stall_detection = false;
        })),
        ..Overrides::default()
    }
}

#[test]
fn calls_sent_to_a_paused_host_are_found_with_stall_detection_off() {
    let overrides = stall_detection_off();
    for seed in 0..SEEDS {
        let schedule = Schedule::draw(seed);
        if !schedule
            .events
            .iter()
            .any(|event| event.kind == Kind::Pause)
        {
            continue;
        }
        let outcome = run(schedule, &overrides).expect("the simulation runs");
        if let Some(violation) = outcome
            .violations
            .iter()
            .find(|violation| violation.invariant == LATE_CALLS)
        {
            println!("seed {seed} finds it: {violation}");
            return;
        }
    }
    panic!("no seed of 0..{SEEDS} found calls sent to a paused host");
}

/// Late calls (invariant 7) over the seeds `0..SEEDS` that pause a host.
fn late_calls(overrides: &Overrides) -> usize {
    (0..SEEDS)
        .map(Schedule::draw)
        .filter(|schedule| {
            schedule
                .events
                .iter()
                .any(|event| event.kind == Kind::Pause)
        })
        .map(|schedule| run(schedule, overrides).expect("the simulation runs"))
        .map(|outcome| {
            outcome
                .violations
                .iter()
                .filter(|violation| violation.invariant == LATE_CALLS)
                .count()
        })
        .sum()
}

#[test]
fn stall_detection_sends_several_times_fewer_calls_into_a_pause() {
    let off = late_calls(&stall_detection_off());
    let on = late_calls(&Overrides::default());
    println!(
        "late calls over the pausing seeds of 0..{SEEDS}: {off} with stall detection off, {on} on"
    );
    assert!(off > 5 * on.max(1), "off {off}, on {on}");
}
