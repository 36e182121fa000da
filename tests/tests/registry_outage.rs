//! Issue 12, rule 4: a registry outage loses nothing.
//!
//! Each test starts its OWN registry server process (etcd, ZooKeeper through `java`, or
//! rnacos) on free loopback ports (`rpc_testkit::registry_server`), never the shared one
//! of scripts/registries.sh: it kills that server under load and starts it again on the
//! same port with the same data. Three providers and a consumer run in this process.
//! Under a steady load through the registry:
//!
//! 1. the server is killed; the consumer keeps its last known providers;
//! 2. halfway through the outage one provider stops gracefully (it cannot unregister:
//!    its consumers learn from its closing mark and its refusals);
//! 3. the server comes back on the same port, with its data or (etcd, ZooKeeper) without
//!    it; every remaining provider is registered again, as a fresh client of the server
//!    sees (a bounded wait: how soon — the rule asks for 5 s — is a timing figure, which
//!    the benchmark `benches/benches/registry_reregistration.rs` measures);
//! 4. right after, another provider stops gracefully;
//!
//! and not one call fails, and both stops are clean: exit code 0, nothing forced (the
//! one during the outage cannot withdraw its registration, which costs nothing: it is
//! not forced).
//!
//! The outage lasts `RPC_TEST_OUTAGE_SECS` seconds (default 8 here, to keep CI short;
//! the figures of the issue are taken with 30). Either way it outlasts the liveness
//! bound of every registration (etcd lease TTL 3 s, ZooKeeper session timeout 4 s, set
//! in the URLs below): a client that gave up on its lease or session while the server
//! was away would come back without its registrations. etcd and ZooKeeper keep leases
//! and sessions in their data and restart the countdown when they start again, so their
//! clients find them still valid; rnacos keeps no ephemeral instance across a restart,
//! so Nacos clients must register again.
//!
//! Known limit (Nacos): nacos-sdk 0.8.3 retries a lost connection after 2, 4, 8, 16,
//! 32, then 64 s (its `sleep_time`, not configurable), so how soon it registers again
//! depends on where the server's return falls in that schedule: 4 s after an 8 s
//! outage here, but after a 30 s outage the next attempt can be more than 5 s away.
//!
//! Needs `etcd`, `java` with ZooKeeper's jar, and `rnacos`; a test whose server cannot
//! start prints SKIPPED unless `RPC_TEST_REQUIRE_REGISTRIES=1`.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use parking_lot::Mutex;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::{Application, Config, ReferenceChannel, ServiceKey};
use rpc_testkit::echo_calls::{echo_once, until_every_provider_answers};
use rpc_testkit::registry_server::{Backend, RegistryServer};
use rpc_testkit::services::EchoProvider;
use tokio::time::Instant;

/// Requests per second, open loop, for the whole test.
const RATE: u64 = 100;
/// Load before the outage begins.
const BEFORE: Duration = Duration::from_secs(2);
/// Load after the server is back and the second provider stopped.
const AFTER: Duration = Duration::from_secs(4);
/// Bound on the providers being registered again (an event waited for; the rule's 5 s
/// is the benchmark's figure).
const REREGISTER_WAIT: Duration = Duration::from_secs(30);
/// Each call's own deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the consumer seeing every provider before the load starts.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Provider work per request.
const WORK_MS: u32 = 5;

fn outage() -> Duration {
    let seconds = std::env::var("RPC_TEST_OUTAGE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    Duration::from_secs(seconds)
}

/// The URL the applications use: short liveness bounds, so the outage outlasts them.
fn client_url(server: &RegistryServer) -> String {
    match server.backend() {
        Backend::Etcd => format!("{}?ttl=3s", server.url()),
        Backend::ZooKeeper => format!("{}?session_timeout=4s", server.url()),
        Backend::Nacos => server.url(),
    }
}

fn config(name: &str, url: &str) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.application.logging = false;
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    config
        .registries
        .get_mut("default")
        .expect("default registry")
        .url = url.to_owned();
    config
}

async fn provider(n: usize, url: &str) -> Application {
    let mut config = config(&format!("outage-provider-{n}"), url);
    config
        .provider
        .services
        .insert("echo.Echo".to_owned(), Default::default());
    let mut builder = Application::builder(config);
    builder.service(EchoServer::new(EchoProvider { work_ms: WORK_MS }));
    builder.start().await.expect("the provider starts")
}

/// A consumer of `echo.Echo`; the method is not idempotent (the default).
async fn consumer(url: &str) -> (Application, EchoClient<ReferenceChannel>) {
    let mut config = config("outage-consumer", url);
    config
        .consumer
        .references
        .insert("echo.Echo".to_owned(), Default::default());
    let mut builder = Application::builder(config);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let app = builder.start().await.expect("the consumer starts");
    (app, client)
}

async fn call(client: EchoClient<ReferenceChannel>) -> Result<String, tonic::Status> {
    echo_once(client, CALL_TIMEOUT).await
}

fn addr(app: &Application) -> String {
    app.local_addr().expect("serving").to_string()
}

/// Calls until every address in `addrs` has answered (the consumer knows them all).
async fn until_all_known(client: &EchoClient<ReferenceChannel>, addrs: &[String]) {
    until_every_provider_answers(client, addrs, CALL_TIMEOUT, DISCOVERY_TIMEOUT).await;
}

/// Whether a fresh client of the server at `url` sees every address of `expected`
/// registered within `bound`.
async fn registered_within(url: &str, expected: &[String], bound: Duration) -> bool {
    let watch = async {
        let registry = loop {
            match rpc::registry::connect(url).await {
                Ok(registry) => break registry,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let mut subscription = loop {
            match registry.subscribe(&ServiceKey::new("echo.Echo")).await {
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
    tokio::time::timeout(bound, watch).await.is_ok()
}

/// The figures of one run.
#[derive(Debug, Default)]
struct Figures {
    sent: usize,
    failed: usize,
    samples: Vec<String>,
}

/// How the server comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Return {
    /// With its data (leases, sessions, znodes).
    WithData,
    /// Empty, as a replaced server: every client must register again.
    WithoutData,
}

/// The outage on `backend`: see the module documentation.
async fn outage_loses_nothing(backend: Backend, comes_back: Return) {
    let test = format!("registry_outage {backend:?}");
    let Some(mut server) = common::registry::registry(&test, backend).await else {
        return;
    };
    let url = client_url(&server);
    let outage = outage();
    let mut providers = Vec::new();
    for n in 0..3 {
        providers.push(provider(n, &url).await);
    }
    let addrs: Vec<String> = providers.iter().map(addr).collect();
    let (consumer_app, client) = consumer(&url).await;
    until_all_known(&client, &addrs).await;

    // The load, for the whole scenario.
    let records = Arc::new(Mutex::new(Vec::new()));
    let epoch = Instant::now();
    let total = RATE * (BEFORE + outage + AFTER).as_secs();
    let sender = {
        let (client, records) = (client.clone(), records.clone());
        tokio::spawn(async move {
            let mut calls = Vec::new();
            for n in 0..total {
                tokio::time::sleep_until(epoch + Duration::from_micros(n * 1_000_000 / RATE)).await;
                let (client, records) = (client.clone(), records.clone());
                calls.push(tokio::spawn(async move {
                    let start = epoch.elapsed();
                    let result = call(client).await;
                    records.lock().push((start, result));
                }));
            }
            for call in calls {
                let _ = call.await;
            }
        })
    };

    tokio::time::sleep_until(epoch + BEFORE).await;
    server.stop();
    tokio::time::sleep_until(epoch + BEFORE + outage / 2).await;
    let during = providers.remove(0).before_shutdown().await;
    tokio::time::sleep_until(epoch + BEFORE + outage).await;
    match comes_back {
        Return::WithData => server.restart().await,
        Return::WithoutData => server.restart_without_data().await,
    }
    .expect("the server starts again");
    let remaining: Vec<String> = providers.iter().map(addr).collect();
    let reregistered = registered_within(&url, &remaining, REREGISTER_WAIT).await;
    let after = providers.remove(0).before_shutdown().await;

    tokio::time::timeout(AFTER + outage + CALL_TIMEOUT * 2, sender)
        .await
        .expect("the load ends")
        .expect("the sender does not panic");
    let records = std::mem::take(&mut *records.lock());
    let failed: Vec<_> = records.iter().filter(|(_, r)| r.is_err()).collect();
    let figures = Figures {
        sent: records.len(),
        failed: failed.len(),
        samples: failed
            .iter()
            .take(5)
            .map(|(start, result)| format!("{start:?}: {result:?}"))
            .collect(),
    };
    println!(
        "registry outage on {backend:?} (back {comes_back:?}): {outage:?} down under {RATE} req/s; sent {}, failed {}; \
         providers registered again: {reregistered}; \
         stopped during the outage: {during}; stopped right after: {after}",
        figures.sent, figures.failed,
    );

    for provider in providers {
        provider.before_shutdown().await;
    }
    consumer_app.abort().await;
    drop(server);

    assert_eq!(figures.sent as u64, total);
    assert_eq!(figures.failed, 0, "{:?}", figures.samples);
    assert!(
        reregistered,
        "the providers were not registered again within {REREGISTER_WAIT:?}"
    );
    for (when, report) in [("during the outage", &during), ("right after it", &after)] {
        assert!(!report.forced(), "the stop {when} was forced: {report}");
        assert_eq!(report.exit_code(), 0, "the stop {when}: {report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_outage_loses_nothing() {
    outage_loses_nothing(Backend::Etcd, Return::WithData).await;
}

/// etcd comes back empty: the lease is gone, a new one is granted and every
/// registration written again under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_outage_ending_without_data_loses_nothing() {
    outage_loses_nothing(Backend::Etcd, Return::WithoutData).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_outage_loses_nothing() {
    outage_loses_nothing(Backend::ZooKeeper, Return::WithData).await;
}

/// ZooKeeper comes back empty: the session is unknown, a new one is opened and every
/// znode created again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_outage_ending_without_data_loses_nothing() {
    outage_loses_nothing(Backend::ZooKeeper, Return::WithoutData).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacos_outage_loses_nothing() {
    outage_loses_nothing(Backend::Nacos, Return::WithData).await;
}
