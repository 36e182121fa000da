//! Helpers of the tests in the lab of network namespaces (`rpc_testkit::netlab`): echo
//! providers and a consumer inside hosts, on the in-process registry or a registry
//! server of the lab, and a fixed-rate load whose every call is counted.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::cluster::Directory;
use rpc::config::RegistryConfig;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationBuilder, Config};
use rpc_testkit::netlab::Host;
use rpc_testkit::registry_server::{Backend, RegistryServer};
use rpc_testkit::services::EchoProvider;
use rpc_tests::lab_load::{RATE, Tally, WORK_MS, listed, phases_at};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, timeout};

use super::registry::or_skip;

/// Bound on a provider's start and stop.
const BOUND: Duration = Duration::from_secs(60);
/// Bound on each wait for a consumer's directory to change.
const CONVERGE: Duration = Duration::from_secs(60);

/// A registry server of `backend` inside `host`, or `None` after one `SKIPPED` line when
/// it cannot run here — a failure when `RPC_TEST_REQUIRE_REGISTRIES` is set, as in CI.
pub async fn registry_in(test: &str, backend: Backend, host: &Host) -> Option<RegistryServer> {
    registry_in_with(test, backend, host, &[]).await
}

/// As [`registry_in`], with `env` added to the server's environment
/// ([`RegistryServer::start_in_with`]).
pub async fn registry_in_with(
    test: &str,
    backend: Backend,
    host: &Host,
    env: &[(&str, &str)],
) -> Option<RegistryServer> {
    or_skip(
        test,
        RegistryServer::start_in_with(backend, host, env).await,
    )
}

/// As [`registry_in`], a cluster of `backend`, one member on each of `hosts`.
pub async fn registry_cluster_in(
    test: &str,
    backend: Backend,
    hosts: &[Host],
) -> Option<Vec<RegistryServer>> {
    or_skip(test, RegistryServer::start_cluster(backend, hosts).await)
}

/// Where the lab's programs register and discover: the in-process hub (shared by every
/// host's program, not on the lab's network), or a registry server's URL.
#[derive(Clone, Debug)]
pub enum Discovery {
    /// The in-process registry.
    Hub(MemoryHub),
    /// A registry server (`etcd://10.77.0.1:2379?ttl=2s`, …).
    Url(String),
}

impl From<&MemoryHub> for Discovery {
    fn from(hub: &MemoryHub) -> Self {
        Self::Hub(hub.clone())
    }
}

impl Discovery {
    /// An application builder with `config`, registered and discovering here.
    fn builder(&self, config: Config) -> ApplicationBuilder {
        match self {
            Self::Hub(hub) => super::builder_with(config, hub, Duration::ZERO),
            Self::Url(url) => {
                let mut config = config;
                config
                    .registries
                    .insert("default".to_owned(), RegistryConfig::new(url.clone()));
                Application::builder(config)
            }
        }
    }
}

/// An echo provider serving on a host of the lab, until [`Provider::stop`].
pub struct Provider {
    /// Where it serves (host:port), as its answers name it.
    pub address: String,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl Provider {
    /// Starts one on `host`, registered in `discovery`; returns once it is registered.
    pub async fn start(host: &Host, discovery: impl Into<Discovery>) -> Self {
        Self::start_with(host, discovery, |_| {}).await
    }

    /// As [`Provider::start`], its configuration changed by `tweak` first.
    pub async fn start_with(
        host: &Host,
        discovery: impl Into<Discovery>,
        tweak: impl FnOnce(&mut Config) + Send + 'static,
    ) -> Self {
        let (ready, address) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let (discovery, host_address) = (discovery.into(), host.address());
        let serving = tokio::spawn(host.run(move || async move {
            let mut config = super::config("provider");
            config.protocol.host = host_address.to_string();
            config.admin.enabled = false;
            tweak(&mut config);
            let mut builder = discovery.builder(config);
            builder.service(EchoServer::new(EchoProvider { work_ms: WORK_MS }));
            let app = builder.start().await.expect("the provider starts");
            let _ = ready.send(app.local_addr().expect("serving").to_string());
            let _ = stopped.await;
            let _ = app.before_shutdown().await;
        }));
        let address = tokio::time::timeout(BOUND, address)
            .await
            .expect("the provider starts within its bound")
            .expect("the provider starts");
        Self {
            address,
            stop,
            serving,
        }
    }

    /// Stops it gracefully; returns once it has stopped.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(BOUND, self.serving)
            .await
            .expect("the provider stops within its bound")
            .expect("the provider stops");
    }
}

/// A consumer of echo in `discovery` with [`consumer_config`], started (inside a host,
/// when called from [`Host::run`]); its stub and its application.
pub async fn consumer(
    discovery: impl Into<Discovery>,
) -> (EchoClient<rpc::ReferenceChannel>, rpc::Application) {
    consumer_with(discovery, consumer_config()).await
}

/// As [`consumer`], with `config`.
pub async fn consumer_with(
    discovery: impl Into<Discovery>,
    config: Config,
) -> (EchoClient<rpc::ReferenceChannel>, rpc::Application) {
    let mut builder = discovery.into().builder(config);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let app = builder.start().await.expect("the consumer starts");
    (client, app)
}

/// The consumer's settings: idempotent calls with failover, keep-alive PINGs that find
/// a silent host within 600 ms, short ejections so that recovery shows in the run.
pub fn consumer_config() -> rpc::Config {
    let mut config = super::config("consumer");
    config.admin.enabled = false;
    config.consumer.keepalive_interval = Some(Duration::from_millis(200));
    config.consumer.keepalive_timeout = Duration::from_millis(400);
    config.consumer.connect_timeout = Duration::from_millis(300);
    config.consumer.blacklist.base_ejection_time = Duration::from_secs(1);
    let reference = config
        .consumer
        .references
        .entry("echo.Echo".to_owned())
        .or_default();
    reference.idempotent = true;
    reference.timeout = Some(Duration::from_secs(2));
    config
}

/// `RATE` calls a second until `phases`' sender is dropped, each tallied under the
/// phase `phases` held when it was sent; the tally of each phase, by index.
pub async fn phases(
    client: &EchoClient<rpc::ReferenceChannel>,
    phases: watch::Receiver<usize>,
) -> Vec<Tally> {
    phases_at(client, RATE, phases).await
}

/// Waits until the consumer's directory lists exactly `expected`; how long that took.
pub async fn until_listed(directory: &Directory, expected: &[&str]) -> Duration {
    let expected: BTreeSet<String> = expected.iter().map(|a| (*a).to_owned()).collect();
    let started = Instant::now();
    timeout(CONVERGE, async {
        while listed(directory) != expected {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the directory lists {:?}, not {expected:?}",
            listed(directory)
        )
    });
    started.elapsed()
}

/// A consumer on `host`, sending its load (`RATE` calls a second) from the start; its
/// directory, the sender of the script's phase, and the load's end (the tally of each
/// phase).
pub async fn consumer_on(
    host: &Host,
    discovery: &Discovery,
) -> (
    Arc<Directory>,
    watch::Sender<usize>,
    impl std::future::Future<Output = Vec<Tally>>,
) {
    consumer_on_at(host, discovery, RATE).await
}

/// As [`consumer_on`], `rate` calls a second.
pub async fn consumer_on_at(
    host: &Host,
    discovery: &Discovery,
    rate: u32,
) -> (
    Arc<Directory>,
    watch::Sender<usize>,
    impl std::future::Future<Output = Vec<Tally>>,
) {
    consumer_on_with(host, discovery, rate, consumer_config()).await
}

/// As [`consumer_on_at`], the consumer configured by `config`.
pub async fn consumer_on_with(
    host: &Host,
    discovery: &Discovery,
    rate: u32,
    config: Config,
) -> (
    Arc<Directory>,
    watch::Sender<usize>,
    impl std::future::Future<Output = Vec<Tally>>,
) {
    let (phase, phase_rx) = watch::channel(0);
    let (directory_tx, directory) = oneshot::channel();
    let discovery = discovery.clone();
    let load = tokio::spawn(host.run(move || async move {
        let (client, app) = consumer_with(discovery, config).await;
        let _ = directory_tx.send(app.references()[0].directory().clone());
        let tallies = phases_at(&client, rate, phase_rx).await;
        // What the cluster layer did for those calls (retries by kind, ejections).
        println!("consumer: {:?}", app.references()[0].stats());
        let _ = app.before_shutdown().await;
        tallies
    }));
    let directory = timeout(CONVERGE, directory)
        .await
        .expect("the consumer starts in time")
        .expect("the consumer starts");
    let end = async move { load.await.expect("the load ends") };
    (directory, phase, end)
}

pub fn answered_by(tally: &Tally, address: &str) -> usize {
    tally.answered.get(address).copied().unwrap_or(0)
}

pub fn assert_none_failed(test: &str, tallies: &[Tally]) {
    for (phase, tally) in tallies.iter().enumerate() {
        assert!(
            tally.failed.is_empty(),
            "{test}: phase {phase}: {} failed: {:?}",
            tally.failed.len(),
            tally.failed
        );
    }
}

/// What scenario 3 must show, from the tallies of its five phases (before the cut; cut,
/// until the registry removed A; removed; the link back, until A is listed again; listed
/// again): no call failed, A served before the cut, took no call once removed, and
/// serves again once it registered again by itself.
pub fn assert_drained_and_back(test: &str, tallies: &[Tally], a_address: &str) {
    assert_none_failed(test, tallies);
    assert_eq!(tallies.len(), 5, "every phase sent calls");
    assert!(
        answered_by(&tallies[0], a_address) > 0,
        "A serves before the cut"
    );
    assert_eq!(
        answered_by(&tallies[2], a_address),
        0,
        "no call goes to A once the registry removed it"
    );
    assert!(
        answered_by(&tallies[4], a_address) > 0,
        "A registered again by itself and serves"
    );
}

/// What scenario 5 must show, from the tallies of its four phases (before the cut; the
/// consumer cut off while B stops and C starts; the link back, until it converged;
/// converged) and what the consumer listed at the end of the cut: no call failed, the
/// consumer served from the set it knew and had not heard of C, then used C and dropped
/// B.
pub fn assert_served_on_and_converged(
    test: &str,
    tallies: &[Tally],
    known_in_the_cut: &BTreeSet<String>,
    [a, b, c]: [&str; 3],
) {
    assert_none_failed(test, tallies);
    assert_eq!(tallies.len(), 4, "every phase sent calls");
    assert!(
        !known_in_the_cut.contains(c),
        "cut off, the consumer cannot have heard of C"
    );
    assert!(
        answered_by(&tallies[1], a) > 0,
        "cut off, the consumer serves from the set it knew"
    );
    assert!(
        answered_by(&tallies[3], c) > 0,
        "once converged, C takes calls"
    );
    assert_eq!(
        answered_by(&tallies[3], b),
        0,
        "B, stopped meanwhile, is dropped"
    );
}
