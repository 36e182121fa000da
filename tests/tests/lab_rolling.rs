//! A rolling restart across hosts over lossy links (issue 26, scenario 7, on the
//! in-process registry): two echo providers on two hosts of a lab of network namespaces
//! (`rpc_testkit::netlab`), each stopped gracefully and started again in turn, while a
//! consumer on a third host sends 500 idempotent calls/s and every host drops 1 % of its
//! packets in and out (`Fault::Loss`, an nftables `numgen random` rule). TCP repairs
//! the loss; the lifecycle's graceful offline and the consumer's failover must keep
//! every call.
//!
//! Each old provider is restarted once it has answered a call, not after a fixed time:
//! a dial whose SYN is lost gets no answer within the lab's 300 ms connect timeout
//! (the kernel resends it after 1 s), which ejects that provider for a second — the
//! consumer's rule for a host that does not answer — and a fixed wait would then
//! restart a provider the load had not reached yet (CI, stop 46). `SETTLE` only shapes
//! the load (a second of calls before the roll); no outcome depends on it.

mod common;

use std::time::Duration;

use common::lab::{Provider, consumer};
use rpc::registry::MemoryHub;
use rpc_testkit::netlab::{Fault, Lab};
use rpc_tests::lab_load::{Tally, phase_seen, print_tallies};
use tokio::sync::watch;
use tokio::time::timeout;

/// The load runs this long; the first restart begins after `SETTLE`, the second once
/// the first provider is serving again, each once its old provider has answered a call.
const LOAD: Duration = Duration::from_secs(8);
const SETTLE: Duration = Duration::from_secs(1);
/// Bound on the wait for an old provider's first answer.
const FIRST_ANSWER: Duration = Duration::from_secs(5);
/// Nothing in this test may take longer.
const BOUND: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_across_lossy_links_loses_no_call() {
    let test = "a_rolling_restart_across_lossy_links_loses_no_call";
    common::logs();
    let Some(lab) = Lab::for_test(test, 3) else {
        return;
    };
    for index in 0..3 {
        lab.host(index).apply(Fault::Loss(0.01));
    }
    let hub = MemoryHub::new();
    let mut running = vec![
        Provider::start(lab.host(1), &hub).await,
        Provider::start(lab.host(2), &hub).await,
    ];
    let (seen, mut answered_by) = watch::channel(Default::default());
    let load = lab.host(0).run({
        let hub = hub.clone();
        move || async move {
            let (client, app) = consumer(&hub).await;
            let tally = phase_seen(&client, LOAD, &seen).await;
            let _ = app.before_shutdown().await;
            tally
        }
    });
    let roll = async {
        tokio::time::sleep(SETTLE).await;
        let mut served_by = Vec::new();
        for (index, slot) in running.iter_mut().enumerate() {
            let first = timeout(
                FIRST_ANSWER,
                answered_by.wait_for(|seen| seen.contains(&slot.address)),
            );
            assert!(
                matches!(first.await, Ok(Ok(_))),
                "the old provider {} answered within {FIRST_ANSWER:?}",
                slot.address
            );
            let new = Provider::start(lab.host(index + 1), &hub).await;
            let old = std::mem::replace(slot, new);
            served_by.push(old.address.clone());
            old.stop().await;
        }
        served_by
    };
    let (tally, old): (Tally, Vec<String>) = timeout(BOUND, async { tokio::join!(load, roll) })
        .await
        .expect("the run ends within its bound");
    for provider in running {
        provider.stop().await;
    }
    print_tallies(test, std::slice::from_ref(&tally));
    assert!(
        tally.failed.is_empty(),
        "{} failed: {:?}",
        tally.failed.len(),
        tally.failed
    );
    let new: Vec<&String> = tally
        .answered
        .keys()
        .filter(|address| !old.contains(address))
        .collect();
    assert_eq!(new.len(), 2, "both new providers served: {tally:?}");
    assert!(
        old.iter()
            .all(|address| tally.answered.contains_key(address)),
        "both old providers served before their restart: {tally:?}"
    );
}
