//! Faults across hosts (issue 26), in a lab of network namespaces
//! (`rpc_testkit::netlab`): a consumer on one host, two providers on two others, and
//! faults that loopback cannot make — a provider's host that vanishes without a reset,
//! a consumer cut off from one provider the registry still lists.
//!
//! The registry is the in-process one, shared by the hosts' programs (it is not on the
//! lab's network), so it keeps listing a provider whatever its network does: these are
//! the cases where only the consumer's own detection (stall detection, PINGs, the
//! attempt timeout, ejection) can save the calls. What a vanished host's non-idempotent
//! calls cost, and how soon it gets no new call, is measured in `lab_stall.rs` (with
//! the consumer's default settings, from its own counts).

mod common;

use common::lab::{Provider, consumer_config, consumer_with};
use rpc_tests::lab_load::{Tally, phase, print_tallies};

use std::time::Duration;

use rpc::registry::MemoryHub;
use rpc_testkit::netlab::{Fault, Lab};
use tokio::sync::oneshot;
use tokio::time::timeout;

/// The phases of the load (`common::lab`: 500 calls/s of 20 ms): before the fault,
/// during it, after it.
const BEFORE: Duration = Duration::from_secs(2);
const DURING: Duration = Duration::from_secs(2);
const AFTER: Duration = Duration::from_secs(3);
/// Nothing in these tests may take longer.
const BOUND: Duration = Duration::from_secs(60);

/// Runs the load from host 0 in three phases, applying `fault` to host `faulty`
/// between the first and the last; the tally of each phase.
async fn run_through(
    lab: &Lab,
    hub: &MemoryHub,
    config: rpc::Config,
    faulty: usize,
    fault: Fault,
) -> [Tally; 3] {
    let (switch_to_fault, fault_now) = oneshot::channel::<()>();
    let (switch_back, restore_now) = oneshot::channel::<()>();
    let load = lab.host(0).run({
        let hub = hub.clone();
        move || async move {
            let (client, app) = consumer_with(&hub, config).await;
            let before = phase(&client, BEFORE).await;
            let _ = switch_to_fault.send(());
            let during = phase(&client, DURING).await;
            let _ = switch_back.send(());
            let after = phase(&client, AFTER).await;
            let _ = app.before_shutdown().await;
            [before, during, after]
        }
    });
    let faults = async {
        let _ = fault_now.await;
        lab.host(faulty).apply(fault);
        let _ = restore_now.await;
        lab.host(faulty).restore();
    };
    let (tallies, ()) = timeout(BOUND, async { tokio::join!(load, faults) })
        .await
        .expect("the run ends within its bound");
    tallies
}

fn answered_by(tally: &Tally, address: &str) -> usize {
    tally.answered.get(address).copied().unwrap_or(0)
}

/// A hub, and a provider on each of hosts 1 and 2 registered in it.
async fn two_providers(lab: &Lab) -> (MemoryHub, [Provider; 2]) {
    let hub = MemoryHub::new();
    let providers = [
        Provider::start(lab.host(1), &hub).await,
        Provider::start(lab.host(2), &hub).await,
    ];
    (hub, providers)
}

async fn check(test: &str, fault: impl FnOnce(&Lab) -> Fault) {
    common::logs();
    let Some(lab) = Lab::for_test(test, 3) else {
        return;
    };
    let (hub, providers) = two_providers(&lab).await;
    let addresses: Vec<String> = providers.iter().map(|p| p.address.clone()).collect();
    let fault = fault(&lab);
    let tallies = run_through(&lab, &hub, consumer_config(), 1, fault).await;
    for provider in providers {
        provider.stop().await;
    }
    print_tallies(test, &tallies);
    let [before, during, after] = tallies;
    for (name, tally) in [("before", &before), ("during", &during), ("after", &after)] {
        assert!(
            tally.failed.is_empty(),
            "{name} the fault: {:?}",
            tally.failed
        );
    }
    let (faulty, healthy) = (&addresses[0], &addresses[1]);
    assert!(
        answered_by(&before, faulty) > 0,
        "both providers serve before the fault"
    );
    assert!(
        answered_by(&during, healthy) > 0,
        "the healthy provider takes the calls"
    );
    assert!(
        answered_by(&after, faulty) > 0,
        "once its network is back, the provider takes traffic again: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_host_that_vanishes_loses_no_idempotent_call() {
    check(
        "a_provider_host_that_vanishes_loses_no_idempotent_call",
        |_| Fault::Blackhole,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_cut_off_from_one_listed_provider_loses_no_idempotent_call() {
    check(
        "a_consumer_cut_off_from_one_listed_provider_loses_no_idempotent_call",
        // The consumer runs on host 0.
        |lab| Fault::CutFrom(lab.host(0).address()),
    )
    .await;
}

/// The namespaces `ip netns list` shows now.
fn listed_namespaces() -> Vec<String> {
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn a_lab_leaves_nothing_behind_even_when_its_test_panics() {
    let test = "a_lab_leaves_nothing_behind_even_when_its_test_panics";
    if Lab::for_test(test, 0).is_none() {
        return;
    }
    let (made, made_rx) = std::sync::mpsc::channel();
    let panicked = std::thread::spawn(move || {
        let lab = Lab::new(2).expect("a lab");
        made.send(lab.namespaces()).unwrap();
        panic!("the test fails with the lab built");
    })
    .join();
    assert!(panicked.is_err());
    let made = made_rx.recv().unwrap();
    assert_eq!(made.len(), 3, "a switch and two hosts: {made:?}");
    let listed = listed_namespaces();
    assert!(
        made.iter().all(|ns| !listed.contains(ns)),
        "left behind: {listed:?}"
    );
}

#[test]
fn a_lab_sweeps_the_namespaces_of_a_killed_run() {
    let test = "a_lab_sweeps_the_namespaces_of_a_killed_run";
    if Lab::for_test(test, 0).is_none() {
        return;
    }
    // A pid no process has (Linux pids stay below 2^22).
    let stale = format!("{}999999999-0-sw", rpc_testkit::netlab::PREFIX);
    let added = std::process::Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .expect("ip runs");
    assert!(added.success());
    assert!(listed_namespaces().contains(&stale));
    let _lab = Lab::new(1).expect("a lab");
    assert!(
        !listed_namespaces().contains(&stale),
        "the stale namespace is swept"
    );
}
