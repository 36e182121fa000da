//! What an idle fleet costs its registry, per backend: the requests one provider
//! holding one registration sends a second, then what one consumer following 20 quiet
//! services adds beside it, each counted by the server itself
//! (`RegistryServer::requests_received`: etcd's gRPC messages, ZooKeeper's packets,
//! rnacos's requests) over a quiet interval, less what the server counted with no client
//! of ours. A count over a 12 s window resolves 1/12 request a second. Prints `registry_idle_load: backend=… consumer_per_s=… provider_per_s=…`
//! (issue 39's table in docs/registries.md). Against servers of its own, SKIPPED
//! per backend when the server cannot start unless `RPC_TEST_REQUIRE_REGISTRIES=1`.

mod common;

use std::time::Duration;

use common::registry::{next_snapshot, registry};
use rpc_core::{Instance, ServiceKey};
use rpc_testkit::registry_server::{Backend, RegistryServer};

/// Services the consumer follows.
const SERVICES: usize = 20;
/// How long the server counts with no client of ours, and a provider alone.
const QUIET: Duration = Duration::from_secs(12);
/// Given to a new consumer's first reads before counting (the Nacos SDK reads each
/// subscribed service again 1 s after the subscription).
const SETTLE: Duration = Duration::from_secs(2);
/// Longest wait for a snapshot.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(10);
/// The most requests a second one idle client of any backend may cost (etcd: one
/// progress check a second per member; ZooKeeper: a ping each "tick" of the session,
/// ~1.5 s; Nacos: our 1 s connection probe and the SDK's re-reads).
const MOST_PER_SECOND: f64 = 3.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd() {
    idle_load(Backend::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper() {
    idle_load(Backend::ZooKeeper).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos() {
    idle_load(Backend::Nacos).await;
}

async fn idle_load(backend: Backend) {
    let test = format!("registry_idle_load {}", backend.scheme());
    let Some(server) = registry(&test, backend).await else {
        return;
    };
    let url = server.url();
    // What the server counts with no client of ours (its own checks, our reads).
    let alone = per_second(&server, QUIET).await;

    // The provider first, alone: nothing it sends is slower than QUIET.
    let provider = rpc_registry::connect(&url).await.expect("connect");
    let instance = Instance::new(ServiceKey::new("idle.Provided"), "127.0.0.1", 20_880);
    provider.register(&instance).await.expect("register");
    let provider_per_s = per_second(&server, QUIET).await - alone;

    // Then the consumer beside it, counted over a whole period of its slowest request.
    let consumer = rpc_registry::connect(&url).await.expect("connect");
    let services: Vec<ServiceKey> = (0..SERVICES)
        .map(|n| ServiceKey::new(format!("idle.Service{n}")))
        .collect();
    let mut watches = Vec::new();
    for service in &services {
        let mut watch = consumer.subscribe(service).await.expect("subscribe");
        next_snapshot(&mut watch, SNAPSHOT_WAIT).await;
        watches.push(watch);
    }
    tokio::time::sleep(SETTLE).await;
    let both = per_second(&server, consumer_window(backend)).await - alone;
    let consumer_per_s = both - provider_per_s;

    println!(
        "registry_idle_load: backend={} services={SERVICES} consumer_s={} provider_s={} consumer_per_s={consumer_per_s:.2} provider_per_s={provider_per_s:.2} (±{:.2}: whole requests over the windows)",
        backend.scheme(),
        consumer_window(backend).as_secs(),
        QUIET.as_secs(),
        2.0 / QUIET.as_secs_f64(),
    );
    assert!(
        consumer_per_s <= MOST_PER_SECOND,
        "{backend:?}: a consumer of {SERVICES} quiet services sends {consumer_per_s:.2} requests/s"
    );
    assert!(
        both <= 2.0 * MOST_PER_SECOND,
        "{backend:?}: an idle consumer and provider send {both:.2} requests/s"
    );

    // The watches still follow their services.
    let arrival = Instance::new(services[0].clone(), "127.0.0.1", 20_881);
    provider.register(&arrival).await.expect("register");
    assert_eq!(next_snapshot(&mut watches[0], SNAPSHOT_WAIT).await.len(), 1);
    provider.close().await.expect("close");
    consumer.close().await.expect("close");
}

/// How long a consumer is counted: a whole period of its client's slowest periodic
/// request — the Nacos SDK reads every subscribed service again each 60 s (rnacos's
/// `cacheMillis`, 10 s, times the SDK's 6), etcd and ZooKeeper send nothing slower than
/// the lease's or session's third (10 s TTL, 10 s session).
fn consumer_window(backend: Backend) -> Duration {
    match backend {
        Backend::Nacos => Duration::from_secs(61),
        _ => QUIET,
    }
}

/// The requests a second the server counts over `window`.
async fn per_second(server: &RegistryServer, window: Duration) -> f64 {
    let before = server
        .requests_received()
        .await
        .expect("the server's count");
    // The measured interval itself: what arrives in it is the figure.
    tokio::time::sleep(window).await;
    let after = server
        .requests_received()
        .await
        .expect("the server's count");
    after.saturating_sub(before) as f64 / window.as_secs_f64()
}
