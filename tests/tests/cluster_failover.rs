//! The consumer side of an unplanned death: one of three providers is killed under
//! 500 requests/s. Only calls in flight on it may fail; every call that had not run is
//! re-routed; once its failures in a row eject it (5, the default), the consumer sends
//! it nothing more — until then a call that P2C still sends it meets a refused dial and
//! goes elsewhere; a replacement gets traffic as soon as it is registered.

mod common;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::registry::MemoryHub;
use rpc_testkit::load::{self, LoadOptions};
use tokio::time::Instant;

#[derive(Debug, Default)]
struct Kill {
    /// Calls the consumer had in flight on the victim when it was killed, plus those it
    /// dispatched to it while the kill was under way.
    in_flight: u64,
    /// Attempts dispatched to the victim before the kill.
    dispatched_before: u64,
    replacement: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_of_three_fails_only_its_in_flight_calls() {
    common::logs();
    let hub = MemoryHub::new();
    let mut providers = Vec::new();
    for n in 0..3 {
        providers
            .push(common::echo_provider(&hub, 20, common::config(&format!("provider-{n}"))).await);
    }
    let victim = providers.remove(1);
    let victim_addr = victim.local_addr().unwrap().to_string();

    // The consumer hears of registry changes 2 s late: until then only the cluster
    // layer (failure penalty, ejection, failover) protects it.
    let mut builder = common::builder("consumer", &hub, Duration::from_secs(2));
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let consumer = builder.start().await.unwrap();
    let directory = consumer.references()[0].directory().clone();
    let dead = directory
        .list()
        .invokers()
        .iter()
        .find(|invoker| invoker.authority() == victim_addr)
        .cloned()
        .expect("the victim is known");

    let kill = Arc::new(Mutex::new(Kill::default()));
    let started = Instant::now();
    let record = load::run(
        LoadOptions::new(500, Duration::from_secs(10)),
        |_| {
            let mut client = client.clone();
            async move {
                let request = EchoRequest {
                    payload: bytes::Bytes::from_static(b"x"),
                    delay_ms: None,
                };
                client.echo(request).await.map(|r| r.into_inner().provider)
            }
        },
        |_load| {
            let kill = kill.clone();
            let dead = dead.clone();
            let hub = hub.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(started + Duration::from_secs(3)).await;
                let before = dead.stats().dispatched;
                let active = dead.active() as u64;
                victim.abort().await;
                {
                    let mut kill = kill.lock();
                    kill.in_flight = active + (dead.stats().dispatched - before);
                    kill.dispatched_before = before;
                }
                tokio::time::sleep_until(started + Duration::from_secs(6)).await;
                let replacement =
                    common::echo_provider(&hub, 20, common::config("replacement")).await;
                kill.lock().replacement = replacement.local_addr().unwrap().to_string();
                // Keep it serving until the load ends.
                tokio::time::sleep_until(started + Duration::from_secs(12)).await;
                replacement.before_shutdown().await;
            });
        },
    )
    .await;

    let kill = std::mem::take(&mut *kill.lock());
    let stats = consumer.references()[0].stats();
    let dead_stats = dead.stats();
    println!(
        "sent={} succeeded={} failed={} {:?}; in flight on the victim at kill={}; consumer {:?}; victim {:?}",
        record.sent,
        record.succeeded,
        record.failed(),
        record.failed_by_code,
        kill.in_flight,
        stats,
        dead_stats
    );
    assert_eq!(record.sent, 5_000);
    assert_eq!(record.succeeded + record.failed(), record.sent);
    assert!(
        record.failed() <= kill.in_flight,
        "only calls in flight on the killed instance may fail: {} failed, {} were in flight; {:?}",
        record.failed(),
        kill.in_flight,
        record.failure_samples
    );
    // The victim stayed listed for 2 s after its death, under 500 calls/s: attempts
    // reached it and failed (its calls in flight, refused dials), so its run of failures
    // began, and it was never answered again.
    assert!(
        dead_stats.failing_since.is_some(),
        "attempts failed on the killed instance: {dead_stats:?}"
    );
    // What it was sent after the kill: its calls in flight then, and the refused dials
    // that brought its run of failures to the ejection's count — nothing once ejected.
    let after_kill = dead_stats.dispatched - kill.dispatched_before;
    let ejecting = u64::from(rpc::cluster::BlacklistConfig::default().consecutive_failures);
    assert!(
        after_kill <= kill.in_flight + ejecting,
        "{after_kill} attempts went to the dead instance after the kill: more than the {} in \
         flight and the {ejecting} failures that eject it; {dead_stats:?}",
        kill.in_flight
    );
    assert!(
        dead_stats.failures >= after_kill,
        "every attempt it got after the kill failed: {dead_stats:?}"
    );
    assert!(
        record
            .by_provider
            .get(&kill.replacement)
            .copied()
            .unwrap_or(0)
            > 0,
        "the replacement got traffic: {:?}",
        record.by_provider
    );
    consumer.before_shutdown().await;
    for provider in &providers {
        provider.before_shutdown().await;
    }
}
