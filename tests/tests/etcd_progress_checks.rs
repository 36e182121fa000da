//! An idle consumer following many services asks etcd for one progress notification
//! per member per quiet second, not one per watch: the check proves the member's
//! connection alive for every watch on it (`rpc-registry/src/etcd/member_heard.rs`).
//! With one check per watch, 1 000 idle consumers of 20 services each sent etcd 20 000
//! requests a second (issue 39).
//!
//! Counted by etcd itself: the Watch stream messages its `/metrics` says it received
//! while nothing changed. Then a change still reaches every watch. Against an etcd of its
//! own (`RegistryServer`), SKIPPED when etcd cannot start unless
//! `RPC_TEST_REQUIRE_REGISTRIES=1`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::registry::{next_snapshot, registry};
use rpc_core::{Instance, ServiceKey};
use rpc_testkit::registry_server::Backend;

/// Services the consumer follows, one watch each.
const SERVICES: usize = 20;
/// How long nothing changes while etcd counts.
const QUIET: Duration = Duration::from_secs(5);
/// Longest wait for a snapshot.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_watches_check_their_member_once_for_all() {
    let Some(server) = registry(
        "quiet_watches_check_their_member_once_for_all",
        Backend::Etcd,
    )
    .await
    else {
        return;
    };
    let url = server.url();
    let metrics: SocketAddr = url
        .trim_start_matches("etcd://")
        .parse()
        .expect("etcd://host:port");
    let consumer = rpc_registry::connect(&url).await.expect("connect");
    let services: Vec<ServiceKey> = (0..SERVICES)
        .map(|n| ServiceKey::new(format!("quiet.Service{n}")))
        .collect();
    let mut watches = Vec::new();
    for service in &services {
        let mut watch = consumer.subscribe(service).await.expect("subscribe");
        next_snapshot(&mut watch, SNAPSHOT_WAIT).await;
        watches.push(watch);
    }

    let before = watch_messages_received(metrics).await;
    // The measured interval itself: how many requests a quiet consumer sends in it.
    tokio::time::sleep(QUIET).await;
    let requests = watch_messages_received(metrics).await - before;
    println!(
        "etcd_progress_checks: services={SERVICES} members=1 quiet_s={} watch_requests={requests} per_s={:.1}",
        QUIET.as_secs(),
        requests as f64 / QUIET.as_secs_f64()
    );
    // One check per quiet second for the one member (each answered at once); one per
    // watch would be about SERVICES × 5.
    assert!(
        requests <= 2 * QUIET.as_secs(),
        "{requests} Watch requests in {QUIET:?} from one consumer's {SERVICES} quiet watches"
    );

    // Every watch still follows its service.
    let provider = rpc_registry::connect(&url).await.expect("connect");
    for (service, watch) in services.iter().zip(&mut watches) {
        let instance = Instance::new(service.clone(), "127.0.0.1", 20_880);
        provider.register(&instance).await.expect("register");
        let seen = next_snapshot(watch, SNAPSHOT_WAIT).await;
        assert_eq!(seen.len(), 1, "{service}: {seen:?}");
    }
    provider.close().await.expect("close");
    consumer.close().await.expect("close");
}

/// The messages etcd received on Watch streams (creations and progress requests), from
/// its `/metrics` (gRPC's server counters).
async fn watch_messages_received(etcd: SocketAddr) -> u64 {
    let answer = rpc_testkit::http::get(etcd, "/metrics")
        .await
        .expect("etcd's /metrics");
    answer
        .body
        .lines()
        .filter(|line| {
            line.starts_with("grpc_server_msg_received_total{")
                && line.contains("grpc_method=\"Watch\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
