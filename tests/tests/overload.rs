//! The provider's concurrency limit under real applications: a saturated provider's
//! excess is refused at once as "overloaded, not executed", our consumer places it on an
//! instance with room (0 failed), a plain gRPC client sees RESOURCE_EXHAUSTED, and when
//! every instance is saturated a call ends quickly as RESOURCE_EXHAUSTED after a bounded
//! number of re-routes.
//!
//! "Saturated" is made without timing: a gated provider holds every request it admits
//! until the test opens its gate, and its limit is fixed (min = max).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use proto::echo::{EchoReply, EchoRequest};
use rpc::cluster::LoadBalanceKind;
use rpc::registry::MemoryHub;
use rpc::{Application, ReferenceChannel};
use tokio::sync::Semaphore;
use tonic::Code;

/// An echo provider that holds each request until its gate lets it through.
#[derive(Clone)]
struct Gated {
    /// Requests that reached the handler.
    ran: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
    /// Open: requests pass without waiting.
    open: Arc<std::sync::atomic::AtomicBool>,
}

impl Default for Gated {
    fn default() -> Self {
        Self {
            ran: Arc::default(),
            gate: Arc::new(Semaphore::new(0)),
            open: Arc::default(),
        }
    }
}

impl Gated {
    fn ran(&self) -> usize {
        self.ran.load(Ordering::SeqCst)
    }

    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }
}

#[tonic::async_trait]
impl proto::echo::echo_server::Echo for Gated {
    async fn echo(
        &self,
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<EchoReply>, tonic::Status> {
        self.ran.fetch_add(1, Ordering::SeqCst);
        if !self.open.load(Ordering::SeqCst) {
            let _passed = self.gate.acquire().await;
        }
        let provider = request
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        Ok(tonic::Response::new(EchoReply {
            payload: request.into_inner().payload,
            provider,
        }))
    }
}

/// Opens every gate when dropped, so a failing test does not leave handlers parked
/// (and shutdowns waiting on them).
struct OpenOnDrop(Vec<Gated>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        for gated in &self.0 {
            gated.open();
        }
    }
}

fn echo() -> EchoRequest {
    EchoRequest {
        payload: bytes::Bytes::from_static(b"payload"),
        delay_ms: None,
    }
}

/// A provider whose limit is fixed at `limit` (`None`: no limit).
async fn provider(hub: &MemoryHub, name: &str, gated: &Gated, limit: Option<u32>) -> Application {
    let mut config = common::config(name);
    if let Some(limit) = limit {
        let section = &mut config.provider.limit;
        section.enabled = true;
        section.initial_limit = limit;
        section.min_limit = limit;
        section.max_limit = limit;
    }
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    builder.service(EchoServer::new(gated.clone()));
    builder.start().await.expect("provider starts")
}

async fn consumer(hub: &MemoryHub, retries: u32) -> (Application, EchoClient<ReferenceChannel>) {
    let mut config = common::config("consumer");
    let entry = config
        .consumer
        .references
        .entry("echo.Echo".to_owned())
        .or_default();
    entry.loadbalance = LoadBalanceKind::RoundRobin;
    entry.retries = retries;
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    (builder.start().await.expect("consumer starts"), client)
}

/// The provider's count of requests refused at its limit, from its metrics.
fn refused(app: &Application) -> u64 {
    let text = app.metrics().encode();
    text.lines()
        .find_map(|line| line.strip_prefix("rpc_server_rejected_overload_total "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no overload counter in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_providers_excess_goes_to_the_other_and_nothing_fails() {
    let hub = MemoryHub::new();
    let (busy, free) = (Gated::default(), Gated::default());
    free.open();
    let _open = OpenOnDrop(vec![busy.clone(), free.clone()]);
    let busy_app = provider(&hub, "busy", &busy, Some(1)).await;
    let free_app = provider(&hub, "free", &free, None).await;
    let (consumer_app, client) = consumer(&hub, 0).await;

    // One call held in the busy provider: it is full.
    let mut held = None;
    for _ in 0..4 {
        if busy.ran() == 1 {
            break;
        }
        let mut client = client.clone();
        let call = tokio::spawn(async move { client.echo(echo()).await });
        // Either it reached the busy provider (and waits there) or it is answered.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while busy.ran() == 0 && !call.is_finished() {
            assert!(tokio::time::Instant::now() < deadline, "no answer");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if busy.ran() == 1 {
            held = Some(call);
        } else {
            call.await.unwrap().expect("answered by the free provider");
        }
    }
    let held = held.expect("round robin reached the busy provider");

    // Retries 0: only the free re-route can save a refused call.
    let calls = 40;
    let mut answers = Vec::new();
    for _ in 0..calls {
        let mut client = client.clone();
        answers.push(tokio::spawn(async move { client.echo(echo()).await }));
    }
    for answer in answers {
        let reply = answer.await.unwrap().expect("no call fails");
        assert_eq!(
            reply.into_inner().provider,
            free_app.local_addr().unwrap().to_string()
        );
    }
    assert_eq!(busy.ran(), 1, "refused requests never ran");
    assert!(
        refused(&busy_app) >= 1,
        "round robin sent some to the busy one"
    );

    // A plain gRPC client (no rpc-consumer header) gets RESOURCE_EXHAUSTED.
    let channel = tonic::transport::Endpoint::from_shared(format!(
        "http://{}",
        busy_app.local_addr().unwrap()
    ))
    .unwrap()
    .connect()
    .await
    .unwrap();
    let status = EchoClient::new(channel).echo(echo()).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(busy.ran(), 1);

    busy.open();
    held.await.unwrap().expect("the held call completes");
    consumer_app.before_shutdown().await;
    busy_app.before_shutdown().await;
    free_app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_instance_is_saturated_calls_end_as_resource_exhausted_after_one_reroute() {
    let hub = MemoryHub::new();
    let gates: Vec<Gated> = (0..3).map(|_| Gated::default()).collect();
    let _open = OpenOnDrop(gates.clone());
    let mut apps = Vec::new();
    for (n, gated) in gates.iter().enumerate() {
        apps.push(provider(&hub, &format!("provider-{n}"), gated, Some(1)).await);
    }
    let (consumer_app, client) = consumer(&hub, 0).await;

    // Fill each provider's one place: round robin sends consecutive calls to different
    // instances, and a call refused by a full one is re-routed to one with room.
    let mut held = Vec::new();
    for n in 0..3 {
        let mut client = client.clone();
        held.push(tokio::spawn(async move { client.echo(echo()).await }));
        let total = n + 1;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while gates.iter().map(Gated::ran).sum::<usize>() < total {
            assert!(tokio::time::Instant::now() < deadline, "not admitted");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    assert!(gates.iter().all(|g| g.ran() == 1), "one held in each");
    let refused_before: u64 = apps.iter().map(refused).sum();

    let calls = 30u64;
    for _ in 0..calls {
        let status = client.clone().echo(echo()).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }
    let refused_after: u64 = apps.iter().map(refused).sum();
    // Retries 0: the first attempt and its one free re-route, never the third instance.
    assert_eq!(refused_after - refused_before, 2 * calls);
    assert!(gates.iter().all(|g| g.ran() == 1), "nothing refused ran");

    // Retries do not change it: failover does not retry an overload refusal.
    let (retrying_app, retrying) = consumer(&hub, 2).await;
    let before: u64 = apps.iter().map(refused).sum();
    for _ in 0..calls {
        let status = retrying.clone().echo(echo()).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
    }
    let sent = apps.iter().map(refused).sum::<u64>() - before;
    assert_eq!(sent, 2 * calls, "one attempt and one re-route per call");

    for gated in &gates {
        gated.open();
    }
    for call in held {
        call.await.unwrap().expect("held calls complete");
    }
    retrying_app.before_shutdown().await;
    consumer_app.before_shutdown().await;
    for app in apps {
        app.before_shutdown().await;
    }
}
