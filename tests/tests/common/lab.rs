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

/// A provider of echo on `host`, serving until `stop` fires; resolves once it is
/// stopped. `ready` gets its address once it is registered.
pub fn provider(
    host: &Host,
    hub: &MemoryHub,
    ready: oneshot::Sender<String>,
    stop: oneshot::Receiver<()>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (hub, address) = (hub.clone(), host.address());
    host.run(move || async move {
        let mut config = super::config("provider");
        config.protocol.host = address.to_string();
        config.admin.enabled = false;
        let app = super::echo_provider(&hub, WORK_MS, config).await;
        let _ = ready.send(app.local_addr().expect("serving").to_string());
        let _ = stop.await;
        let _ = app.before_shutdown().await;
    })
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
