//! Metrics on real sockets: a scrape during a graceful shutdown sees the phase move and
//! the rejected counter count exactly the requests that were refused; a scrape of a
//! provider and a consumer lists every metric docs/observability.md documents.

mod common;

use std::sync::Arc;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use rpc::Phase;
use rpc::registry::MemoryHub;
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

/// Echoes at once, except a request whose payload is `hold`, which waits for a permit.
#[derive(Clone)]
struct Holding {
    release: Arc<Semaphore>,
}

#[tonic::async_trait]
impl Echo for Holding {
    async fn echo(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let payload = request.into_inner().payload;
        if payload.as_ref() == b"hold" {
            let _permit = self.release.acquire().await;
        }
        Ok(Response::new(EchoReply {
            payload,
            provider: String::new(),
        }))
    }
}

fn echo(payload: &'static [u8]) -> EchoRequest {
    EchoRequest {
        payload: bytes::Bytes::from_static(payload),
        delay_ms: None,
    }
}

/// `request` as an rpc consumer sends it (`rpc-consumer: 1`): a closing provider refuses
/// it with "closing, not executed" (a plain client gets REFUSED_STREAM instead).
fn as_consumer(request: EchoRequest) -> Request<EchoRequest> {
    let mut request = Request::new(request);
    request.metadata_mut().insert(
        "rpc-consumer",
        tonic::metadata::MetadataValue::from_static("1"),
    );
    request
}

/// The value of the sample `series` (name and labels, as encoded) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.parse().ok())
}

async fn wait_for_phase(app: &rpc::Application, phase: Phase) {
    let mut phases = app.watch_phase();
    tokio::time::timeout(Duration::from_secs(10), phases.wait_for(|p| *p >= phase))
        .await
        .expect("the phase is reached in time")
        .expect("the lifecycle is alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_during_shutdown_sees_the_phase_move_and_every_rejection() {
    let hub = MemoryHub::new();
    let mut config = common::config("provider");
    config.graceful_shutdown.offline_request_window_timeout = Duration::from_millis(100);
    config.graceful_shutdown.step_timeout = Duration::from_secs(20);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let release = Arc::new(Semaphore::new(0));
    builder.service(EchoServer::new(Holding {
        release: release.clone(),
    }));
    let provider = builder.start().await.expect("provider starts");
    let addr = provider.local_addr().expect("it serves");
    let metrics = provider.metrics().clone();
    let mut direct = EchoClient::connect(format!("http://{addr}")).await.unwrap();

    let text = metrics.encode();
    assert_eq!(
        sample(&text, "rpc_lifecycle_phase{phase=\"serving\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rpc_server_rejected_closing_total"),
        Some(0.0),
        "{text}"
    );

    // One request held in flight keeps the drain (step 4) waiting.
    let held = tokio::spawn({
        let mut client = direct.clone();
        async move { client.echo(as_consumer(echo(b"hold"))).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while provider.lifecycle().inbound().current() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the held request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let shutdown = tokio::spawn(provider.before_shutdown());
    wait_for_phase(&provider, Phase::DrainingInbound).await;

    let text = metrics.encode();
    assert_eq!(
        sample(&text, "rpc_lifecycle_phase{phase=\"draining-inbound\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rpc_lifecycle_phase{phase=\"serving\"}"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rpc_server_requests_in_flight"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "rpc_shutdown_step_outcome{step=\"reject-new\",outcome=\"completed\"}"
        ),
        Some(1.0),
        "the steps taken so far are there while shutdown runs: {text}"
    );

    // Every request now is refused; the counter counts each, and nothing else.
    let mut refused: u32 = 0;
    for _ in 0..7 {
        let status = direct.echo(as_consumer(echo(b"late"))).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert_eq!(
            status.metadata().get("rpc-not-executed").unwrap(),
            "closing"
        );
        refused += 1;
    }
    let text = metrics.encode();
    assert_eq!(
        sample(&text, "rpc_server_rejected_closing_total"),
        Some(f64::from(refused)),
        "{text}"
    );

    release.add_permits(1);
    held.await.unwrap().expect("the held request is answered");
    let report = shutdown.await.unwrap();
    assert_eq!(report.rejected, u64::from(refused));

    let text = metrics.encode();
    assert_eq!(
        sample(&text, "rpc_lifecycle_phase{phase=\"stopped\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rpc_server_rejected_closing_total"),
        Some(f64::from(refused)),
        "{text}"
    );
    let calls = |code: u32| {
        let series = format!(
            "rpc_server_call_duration_seconds_count{{rpc_system=\"grpc\",rpc_service=\"echo.Echo\",rpc_method=\"Echo\",rpc_grpc_status_code=\"{code}\"}}"
        );
        sample(&text, &series)
    };
    assert_eq!(calls(0), Some(1.0), "the held call, answered: {text}");
    assert_eq!(
        calls(14),
        Some(f64::from(refused)),
        "the refused ones: {text}"
    );
    for step in [
        "unregister",
        "wait-for-consumers",
        "reject-new",
        "drain-inbound",
        "drain-outbound",
        "destroy-protocols",
        "callbacks",
    ] {
        let series = format!("rpc_shutdown_step_duration_seconds{{step=\"{step}\"}}");
        assert!(sample(&text, &series).is_some(), "{series} in {text}");
    }
    assert_eq!(
        sample(&text, "rpc_server_goaway_sent_total"),
        Some(1.0),
        "{text}"
    );
}

/// Every metric docs/observability.md lists, as its name appears after `# TYPE`.
const DOCUMENTED: [&str; 38] = [
    "rpc_lifecycle_phase",
    "rpc_shutdown_step_duration_seconds",
    "rpc_shutdown_step_outcome",
    "rpc_registrations",
    "rpc_registrations_pending",
    "rpc_registry_operations_total",
    "rpc_server_call_duration_seconds",
    "rpc_server_requests_in_flight",
    "rpc_server_rejected_closing_total",
    "rpc_server_connections_open",
    "rpc_server_goaway_sent_total",
    "rpc_server_connections_preface_timeout_total",
    "rpc_server_connections_idle_timeout_total",
    "rpc_server_connections_shed_total",
    "rpc_server_connections_refused_total",
    "rpc_server_accept_descriptor_shortages_total",
    "rpc_client_call_duration_seconds",
    "rpc_client_attempt_duration_seconds",
    "rpc_client_requests_in_flight",
    "rpc_client_picks_total",
    "rpc_client_instances",
    "rpc_client_ejections_total",
    "rpc_client_unresponsive_ejections_total",
    "rpc_client_retries_total",
    "rpc_client_retry_budget_exhausted_total",
    "rpc_client_failovers_total",
    "rpc_client_no_provider_total",
    "rpc_build_info",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
    // Samples under the histograms, one of each kind.
    "rpc_server_call_duration_seconds_bucket",
    "rpc_client_call_duration_seconds_sum",
    "rpc_client_attempt_duration_seconds_count",
    "rpc_server_call_duration_seconds_count",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_lists_every_documented_metric() {
    let hub = MemoryHub::new();
    let provider = common::greeter_provider(&hub).await;
    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.expect("consumer starts");
    let hello = |name: &str| HelloRequest {
        name: name.to_owned(),
        count: 1,
    };
    client.say_hello(hello("metrics")).await.unwrap();
    let error = client.say_hello(hello("")).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);

    let text = format!(
        "{}{}",
        provider.metrics().encode(),
        consumer.metrics().encode()
    );
    if std::env::var_os("RPC_TEST_PRINT_METRICS").is_some() {
        println!("{text}");
    }
    for name in DOCUMENTED {
        let typed = format!("# TYPE {name} ");
        let sampled = format!("\n{name}{{");
        assert!(
            text.contains(&typed) || text.contains(&sampled),
            "{name} missing from the scrape:\n{text}"
        );
    }
    let client_calls = |code: u32| {
        sample(
            &text,
            &format!(
                "rpc_client_call_duration_seconds_count{{rpc_system=\"grpc\",rpc_service=\"helloworld.Greeter\",rpc_method=\"SayHello\",rpc_grpc_status_code=\"{code}\"}}"
            ),
        )
    };
    assert_eq!(client_calls(0), Some(1.0), "{text}");
    assert_eq!(client_calls(3), Some(1.0), "INVALID_ARGUMENT: {text}");
    assert_eq!(
        sample(
            &text,
            "rpc_client_attempt_duration_seconds_count{rpc_system=\"grpc\",rpc_service=\"helloworld.Greeter\",rpc_method=\"SayHello\",outcome=\"answered\"}"
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "rpc_registry_operations_total{registry=\"default\",operation=\"register\",result=\"ok\"}"
        ),
        Some(1.0),
        "the provider registered once: {text}"
    );

    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}
