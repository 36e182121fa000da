//! Seeds that found a defect, kept: each fails with its defect put back and passes
//! now.

use lossless_rpc_sim::{Overrides, Schedule, run};

/// Calls picked while a dial to a paused host was under way waited for the connect
/// timeout: the PING check of an overdue call had no connection to ping, and lifted
/// the instance's suspicion at once (`rpc-cluster/src/call/dispatch.rs`,
/// `probe_or_await_connection`). With that check put back, these 15 of seeds 0..1000
/// break "a paused host gets no new call"; a consumer restarted while a provider's host
/// is paused (seeds 14, 20, 82) is the common shape.
const DIAL_TO_A_PAUSED_HOST: [u64; 15] = [
    14, 20, 82, 108, 117, 155, 160, 311, 321, 392, 555, 569, 654, 845, 859,
];

/// A closing mark stopped only the registration whose call brought it, while a killed
/// process's entry at the same address (its lease still running) reached the same,
/// now closing, process: consumers went on calling it through that entry
/// (`Blacklist::mark_closing`, `rpc-cluster/src/blacklist.rs`). With the mark limited
/// to one registration again, these 5 of seeds 0..1000 break "a consumer told closing
/// sends no new call there"; each kills a provider and then stops or offlines it
/// gracefully within its predecessor's lease.
const CLOSING_AT_A_SHARED_ADDRESS: [u64; 5] = [1, 266, 363, 398, 992];

/// A hot upgrade's old generation, closing its registry client once drained, withdrew
/// the entry its successor had registered under the same instance id when the memory
/// registry kept the first writer of an id as its owner (`register` in
/// `rpc-registry/src/memory/hub.rs`): the upgraded provider, serving, vanished from
/// every consumer's directory. These are the first seeds that upgrade a provider;
/// with that defect put back each breaks "directories converge".
const UPGRADE_KEEPS_ITS_ENTRY: [u64; 2] = [4, 6];

#[test]
fn an_upgraded_provider_keeps_its_entry() {
    all_pass(&UPGRADE_KEEPS_ITS_ENTRY, Schedule::draw);
}

#[test]
fn calls_do_not_wait_on_a_dial_to_a_paused_host() {
    all_pass(&DIAL_TO_A_PAUSED_HOST, Schedule::draw_without_upgrades);
}

#[test]
fn a_closing_mark_stops_every_registration_of_its_address() {
    all_pass(
        &CLOSING_AT_A_SHARED_ADDRESS,
        Schedule::draw_without_upgrades,
    );
}

/// Runs each seed's schedule as it was drawn when the defect was found: without
/// upgrades for the seeds found before upgrades were simulated.
fn all_pass(seeds: &[u64], draw: fn(u64) -> Schedule) {
    for &seed in seeds {
        let outcome = run(draw(seed), &Overrides::default()).expect("the simulation runs");
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}:\n{}{:#?}",
            outcome.schedule,
            outcome.violations
        );
    }
}
