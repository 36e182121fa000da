//! How soon providers are registered again after a registry outage (issue 12, rule 4:
//! "within 5 s" of the server's return): the timing figure `registry_outage.rs` only
//! waits for, bounded, and the one the conformance suite's lost-session rule (4) used to
//! assert on the wall clock.
//!
//! For each backend and each way a server comes back, each round starts a server of its
//! own (`rpc_testkit::registry_server`, on free loopback ports, never the shared one of
//! scripts/registries.sh), registers two instances through two provider clients with
//! short liveness bounds (etcd lease TTL 3 s, ZooKeeper session timeout 4 s, as the
//! outage test), kills the server (SIGKILL) for `RPC_BENCH_OUTAGE_SECS` seconds (default
//! 8, longer than either bound), starts it again on the same port — with its data, or
//! without it (a replaced server: every lease, session and registration gone) — and
//! measures from the moment it answers again until a fresh client of it lists both
//! instances. `RPC_BENCH_ROUNDS` rounds per case (default 3). A backend whose server
//! cannot start (etcd, `java` with ZooKeeper's jar, rnacos missing) is skipped, saying
//! so.
//!
//! Known limit (Nacos): nacos-sdk 0.8.3 retries a lost connection after 2, 4, 8, 16, 32,
//! then 64 s (not configurable), so where the server's return falls in that schedule
//! decides the figure; rnacos keeps no ephemeral instance across a restart, so it is
//! measured coming back without data only.
//!
//! Run: `cargo bench -p rpc-benches --bench registry_reregistration`. Last line:
//! `registry_reregistration: worst=<ms> target_ms=5000 met=<n>/<cases>`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rpc_core::{Instance, Registry, ServiceKey};
use rpc_testkit::registry_server::{Backend, RegistryServer};
use tokio::time::Instant;

/// The rule's figure.
const TARGET: Duration = Duration::from_secs(5);
/// Bound on one measurement: a round that exceeds it is reported as not registered.
const ROUND_BOUND: Duration = Duration::from_secs(60);

/// How the server comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Return {
    WithData,
    WithoutData,
}

const CASES: [(Backend, Return); 5] = [
    (Backend::Etcd, Return::WithData),
    (Backend::Etcd, Return::WithoutData),
    (Backend::ZooKeeper, Return::WithData),
    (Backend::ZooKeeper, Return::WithoutData),
    (Backend::Nacos, Return::WithoutData),
];

fn main() {
    let rounds = rpc_benches::env_u64("RPC_BENCH_ROUNDS", 3);
    let outage = Duration::from_secs(rpc_benches::env_u64("RPC_BENCH_OUTAGE_SECS", 8));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "registry re-registration after an outage of {outage:?}, {rounds} rounds per case \
         (server back and answering -> a fresh client lists both instances)"
    );
    println!();
    println!("| backend | comes back | p50 | max | target (5 s) |");
    println!("|---|---|---:|---:|---|");
    let (mut worst, mut met, mut cases) = (Duration::ZERO, 0, 0);
    for (backend, comes_back) in CASES {
        let mut figures = Vec::new();
        for round in 0..rounds {
            eprintln!("{backend:?} ({comes_back:?}): round {} ...", round + 1);
            match runtime.block_on(one_round(backend, comes_back, outage)) {
                Ok(figure) => figures.push(figure),
                Err(error) => {
                    println!("| {backend:?} | {comes_back:?} | skipped: {error} | | |");
                    break;
                }
            }
        }
        if figures.is_empty() {
            continue;
        }
        figures.sort();
        let p50 = figures[figures.len() / 2];
        let max = *figures.last().expect("one figure");
        cases += 1;
        met += usize::from(max <= TARGET);
        worst = worst.max(max);
        println!(
            "| {backend:?} | {comes_back:?} | {} | {} | {} |",
            ms(p50),
            ms(max),
            if max <= TARGET { "met" } else { "MISSED" }
        );
    }
    println!();
    println!(
        "registry_reregistration: worst={:.0} target_ms={} met={met}/{cases}",
        worst.as_secs_f64() * 1e3,
        TARGET.as_millis()
    );
}

fn ms(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1e3)
}

/// The URL provider clients use: short liveness bounds, so the outage outlasts them.
fn client_url(server: &RegistryServer) -> String {
    match server.backend() {
        Backend::Etcd => format!("{}?ttl=3s", server.url()),
        Backend::ZooKeeper => format!("{}?session_timeout=4s", server.url()),
        Backend::Nacos => server.url(),
    }
}

/// One outage: how long after the server answered again both instances were listed.
async fn one_round(
    backend: Backend,
    comes_back: Return,
    outage: Duration,
) -> Result<Duration, String> {
    let mut server = RegistryServer::start(backend)
        .await
        .map_err(|error| format!("the server cannot start: {error}"))?;
    let url = client_url(&server);
    let service = ServiceKey::new(format!("bench.Reregistration{:08x}", fastrand::u32(..)));
    let mut providers = Vec::new();
    let mut expected = Vec::new();
    for n in 0..2u16 {
        let provider = rpc_registry::connect(&url)
            .await
            .map_err(|e| e.to_string())?;
        let instance = Instance::new(service.clone(), "127.0.0.1", 31000 + n);
        provider
            .register(&instance)
            .await
            .map_err(|e| e.to_string())?;
        expected.push(instance.authority());
        providers.push(provider);
    }
    listed_within(&server.url(), &service, &expected, ROUND_BOUND)
        .await
        .ok_or("the instances were never listed")?;

    server.stop();
    tokio::time::sleep(outage).await;
    match comes_back {
        Return::WithData => server.restart().await,
        Return::WithoutData => server.restart_without_data().await,
    }
    .map_err(|error| format!("the server does not start again: {error}"))?;
    let figure = listed_within(&server.url(), &service, &expected, ROUND_BOUND)
        .await
        .ok_or_else(|| format!("not registered again within {ROUND_BOUND:?}"));
    for provider in providers {
        let _ = provider.close().await;
    }
    figure
}

/// How long until a fresh client of `url` lists every address of `expected` under
/// `service`; `None` if not within `bound`.
async fn listed_within(
    url: &str,
    service: &ServiceKey,
    expected: &[String],
    bound: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let watch = async {
        let registry: Arc<dyn Registry> = loop {
            match rpc_registry::connect(url).await {
                Ok(registry) => break registry,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let mut subscription = loop {
            match registry.subscribe(service).await {
                Ok(subscription) => break subscription,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        while let Some(snapshot) = subscription.next().await {
            let known: BTreeSet<String> =
                snapshot.instances.iter().map(|i| i.authority()).collect();
            if expected.iter().all(|a| known.contains(a)) {
                break;
            }
        }
        let _ = registry.close().await;
    };
    tokio::time::timeout(bound, watch)
        .await
        .ok()
        .map(|()| started.elapsed())
}
