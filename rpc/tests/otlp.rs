//! Spans exported over OTLP/gRPC reach a collector: an in-process OTLP receiver (a tonic
//! server implementing OpenTelemetry's `TraceService`) gets the spans of one call made
//! through a consumer to a provider, with our attributes, the attempt's span under the
//! call's and the provider's under the attempt's (W3C `traceparent`); a plain client's
//! `traceparent` is continued with the ids the wire carries.

mod otlp_receiver;

use std::sync::Arc;

use lossless_rpc::observe::otlp::OtlpExporter;
use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, Config};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use otlp_receiver::{attribute, is_int, receiver};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc_testkit::services::EchoProvider;
use tracing_subscriber::prelude::*;

fn config(name: &str, endpoint: &str) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.graceful_shutdown.internal_signal = false;
    config.tracing.otlp_endpoint = Some(endpoint.to_owned());
    // Two applications in one process: each admin endpoint on a free port.
    config.admin.port = 0;
    config
}

// One thread: the subscriber is this thread's default, and every span is made on it.
#[tokio::test(flavor = "current_thread")]
async fn a_call_exports_its_client_attempt_and_server_spans() {
    let (received, addr) = receiver().await;
    let endpoint = format!("http://{addr}");
    let consumer_config = config("otlp-consumer", &endpoint);
    let exporter = OtlpExporter::start(&consumer_config)
        .unwrap()
        .expect("an endpoint is configured");
    let subscriber = tracing_subscriber::registry().with(exporter.layer());
    let _default = tracing::subscriber::set_default(subscriber);

    let hub = MemoryHub::new();
    let mut provider = Application::builder(config("otlp-provider", &endpoint));
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();
    let mut consumer = Application::builder(consumer_config);
    consumer.registry("default", Arc::new(hub.client()));
    let mut client = EchoClient::new(consumer.reference("echo.Echo"));
    let consumer = consumer.start().await.unwrap();

    client.echo(EchoRequest::default()).await.unwrap();
    exporter.shutdown().await.unwrap();

    let spans = received.0.lock().clone();
    let find = |name: &str, kind: SpanKind| {
        spans
            .iter()
            .map(|(_, span)| span)
            .find(|span| span.name == name && span.kind == kind as i32)
            .unwrap_or_else(|| {
                let names: Vec<_> = spans.iter().map(|(_, s)| (&s.name, s.kind)).collect();
                panic!("no {name} span of kind {kind:?} among {names:?}")
            })
            .clone()
    };
    let server = find("echo.Echo/Echo", SpanKind::Server);
    let client_span = find("echo.Echo/Echo", SpanKind::Client);
    for span in [&server, &client_span] {
        assert_eq!(attribute(span, "rpc.system").as_deref(), Some("grpc"));
        assert_eq!(attribute(span, "rpc.service").as_deref(), Some("echo.Echo"));
        assert_eq!(attribute(span, "rpc.method").as_deref(), Some("Echo"));
        assert_eq!(
            attribute(span, "rpc.grpc.status_code").as_deref(),
            Some("0")
        );
    }
    assert_eq!(
        attribute(&server, "network.peer.address").as_deref(),
        Some("127.0.0.1")
    );
    let attempt = spans
        .iter()
        .map(|(_, span)| span)
        .find(|span| attribute(span, "rpc.attempt").is_some())
        .expect("an attempt span");
    assert_eq!(
        attempt.parent_span_id, client_span.span_id,
        "attempt under call"
    );
    assert_eq!(attribute(attempt, "rpc.attempt").as_deref(), Some("1"));
    // One trace across the wire: the provider's span is the attempt's child.
    assert_eq!(server.trace_id, attempt.trace_id, "one trace id");
    assert_eq!(
        server.parent_span_id, attempt.span_id,
        "the provider's span under the attempt that reached it"
    );
    assert_eq!(
        attribute(attempt, "server.port"),
        provider.local_addr().map(|addr| addr.port().to_string())
    );
    assert!(is_int(attempt, "server.port"), "a port is an int");
    assert!(is_int(&server, "network.peer.port"), "a port is an int");
    assert!(
        spans.iter().all(|(service, _)| service == "otlp-consumer"),
        "one process, one exporter: the consumer's resource names every span"
    );

    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}

// One thread: the subscriber is this thread's default, and every span is made on it.
#[tokio::test(flavor = "current_thread")]
async fn a_plain_clients_traceparent_is_continued_by_the_exported_span() {
    let (received, addr) = receiver().await;
    let provider_config = config("otlp-provider", &format!("http://{addr}"));
    let exporter = OtlpExporter::start(&provider_config)
        .unwrap()
        .expect("an endpoint is configured");
    let subscriber = tracing_subscriber::registry().with(exporter.layer());
    let _default = tracing::subscriber::set_default(subscriber);
    let hub = MemoryHub::new();
    let mut provider = Application::builder(provider_config);
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();

    let address = provider.local_addr().expect("the provider listens");
    let mut client = EchoClient::connect(format!("http://{address}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(EchoRequest::default());
    request.metadata_mut().insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    client.echo(request).await.unwrap();
    exporter.shutdown().await.unwrap();

    let spans = received.0.lock().clone();
    let server = spans
        .iter()
        .map(|(_, span)| span)
        .find(|span| span.kind == SpanKind::Server as i32)
        .expect("the provider's span");
    assert_eq!(
        server.trace_id,
        0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128.to_be_bytes(),
        "the client's trace"
    );
    assert_eq!(
        server.parent_span_id,
        0x00f0_67aa_0ba9_02b7_u64.to_be_bytes(),
        "under the client's span"
    );
    provider.before_shutdown().await;
}
