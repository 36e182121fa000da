//! Helpers of the tests in the lab of network namespaces (`rpc_testkit::netlab`): echo
//! providers and a consumer inside hosts, and a fixed-rate load whose every call is
//! counted.

use std::collections::BTreeMap;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::registry::MemoryHub;
use rpc_testkit::netlab::Host;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Calls a second of the load: 500, each 20 ms of work.
pub const RATE: u32 = 500;
/// Milliseconds of work per call.
pub const WORK_MS: u32 = 20;

/// How the calls of one phase of the run ended.
#[derive(Debug, Default)]
pub struct Tally {
    /// Answers by the provider that gave them (host:port).
    pub answered: BTreeMap<String, usize>,
    /// The status of each call that failed.
    pub failed: Vec<String>,
}

/// Bound on a provider's start and stop.
const BOUND: Duration = Duration::from_secs(60);

/// An echo provider serving on a host of the lab, until [`Provider::stop`].
pub struct Provider {
    /// Where it serves (host:port), as its answers name it.
    pub address: String,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl Provider {
    /// Starts one on `host`, registered in `hub`; returns once it is registered.
    pub async fn start(host: &Host, hub: &MemoryHub) -> Self {
        let (ready, address) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let (hub, host_address) = (hub.clone(), host.address());
        let serving = tokio::spawn(host.run(move || async move {
            let mut config = super::config("provider");
            config.protocol.host = host_address.to_string();
            config.admin.enabled = false;
            let app = super::echo_provider(&hub, WORK_MS, config).await;
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

/// A consumer of echo in `hub` with [`consumer_config`], started (inside a host, when
/// called from [`Host::run`]); its stub and its application.
pub async fn consumer(hub: &MemoryHub) -> (EchoClient<rpc::ReferenceChannel>, rpc::Application) {
    let mut builder = super::builder_with(consumer_config(), hub, Duration::ZERO);
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

/// `RATE` calls a second for `length`, each awaited; how they ended.
pub async fn phase(client: &EchoClient<rpc::ReferenceChannel>, length: Duration) -> Tally {
    let mut calls = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / RATE);
    let end = Instant::now() + length;
    while Instant::now() < end {
        ticker.tick().await;
        let mut client = client.clone();
        calls.spawn(async move {
            client
                .echo(EchoRequest {
                    payload: bytes::Bytes::from_static(b"x"),
                    delay_ms: None,
                })
                .await
                .map(|reply| reply.into_inner().provider)
        });
    }
    let mut tally = Tally::default();
    while let Some(done) = calls.join_next().await {
        match done.expect("a call task does not panic") {
            Ok(provider) => *tally.answered.entry(provider).or_default() += 1,
            Err(status) => tally.failed.push(status.to_string()),
        }
    }
    tally
}
