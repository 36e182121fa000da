//! A deploy seen end to end in a trace: a call that a provider's shutdown turns away and
//! the shutdown step that did are linked to each other in the exported spans (span
//! links both ways, attribute `lossless_rpc.deploy.action = refused`), so a trace back
//! end shows, from the call, which step of which deploy refused it, and from the deploy,
//! which calls it refused.
//!
//! For a refusal, a tonic client marked as one of our consumers (`rpc-consumer: 1`: the provider then
//! refuses its late calls as "closing, not executed" for it to re-send, rather than
//! sending it a GOAWAY as to a plain client) keeps one call in flight, so shutdown step 4
//! waits for it, then sends a call carrying its own `traceparent` while the provider
//! rejects new requests: a consumer that has not yet heard of the deregistration. For a
//! move, the same client follows a feed whose handler ends its stream as moved when the
//! shutdown tells it to.

mod otlp_receiver;

use std::sync::Arc;
use std::time::Duration;

use lossless_rpc::observe::otlp::OtlpExporter;
use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, Config, Phase};
use opentelemetry_proto::tonic::trace::v1::Span;
use otlp_receiver::{attribute, hex, receiver};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use proto::feed::SubscribeRequest;
use proto::feed::feed_client::FeedClient;
use proto::feed::feed_server::FeedServer;
use rpc_testkit::feed::FeedProvider;
use rpc_testkit::services::EchoProvider;
use tracing_subscriber::prelude::*;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Waits (bounded) until `done` holds, looking every few milliseconds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} within 10 s"));
}

/// `request`, marked as our consumers mark theirs.
fn as_consumer<T>(mut request: tonic::Request<T>) -> tonic::Request<T> {
    request
        .metadata_mut()
        .insert("rpc-consumer", "1".parse().unwrap());
    request
}

fn links_to<'a>(span: &'a Span, other: &Span) -> Option<&'a str> {
    span.links
        .iter()
        .find(|link| link.span_id == other.span_id && link.trace_id == other.trace_id)
        .and_then(|link| {
            link.attributes
                .iter()
                .find(|attribute| attribute.key == "lossless_rpc.deploy.action")
        })
        .and_then(
            |attribute| match attribute.value.as_ref()?.value.as_ref()? {
                opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(text) => {
                    Some(text.as_str())
                }
                _ => None,
            },
        )
}

/// The OTLP receiver, the exporter sending to it, and a provider of echo and feed (its
/// shutdown quick to reach step 3: no consumer of ours watches it).
async fn start_provider() -> (otlp_receiver::Received, OtlpExporter, Application) {
    let (received, addr) = receiver().await;
    let mut config = Config::default();
    config.application.name = "deploy-links".into();
    config.graceful_shutdown.internal_signal = false;
    config.graceful_shutdown.consumer_update_wait_time = Duration::from_millis(100);
    config.graceful_shutdown.offline_request_window_timeout = Duration::from_millis(50);
    config.tracing.otlp_endpoint = Some(format!("http://{addr}"));
    config.admin.port = 0;
    let exporter = OtlpExporter::start(&config).unwrap().expect("an endpoint");
    let hub = MemoryHub::new();
    let mut provider = Application::builder(config);
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    provider.service(FeedServer::new(FeedProvider::moving("deploy-links")));
    // Started under the caller's subscriber (set after this returns): the provider's
    // spans are made when calls and the shutdown run.
    let provider = provider.start().await.unwrap();
    (received, exporter, provider)
}

/// The span of `name` in the trace `TRACE_ID` (the call the test's client made).
fn call_span<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|span| hex(&span.trace_id) == TRACE_ID && span.name == name)
        .unwrap_or_else(|| panic!("no {name} span in the caller's trace"))
}

/// The span that links to `call`, and what the link says.
fn linked_step<'a>(spans: &'a [Span], call: &Span) -> (&'a Span, &'a str) {
    spans
        .iter()
        .find_map(|span| Some((span, links_to(span, call)?)))
        .unwrap_or_else(|| {
            let names: Vec<_> = spans
                .iter()
                .map(|span| (&span.name, span.links.len()))
                .collect();
            panic!("no span links to the call: {names:?}")
        })
}

fn traced<T>(message: T) -> tonic::Request<T> {
    let mut request = as_consumer(tonic::Request::new(message));
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-00f067aa0ba902b7-01")
            .parse()
            .unwrap(),
    );
    request
}

// One thread: the subscriber is this thread's default, and every span (the shutdown
// sequence's task too) is made on it.
#[tokio::test(flavor = "current_thread")]
async fn a_refused_call_and_the_step_that_refused_it_are_linked() {
    let (received, exporter, provider) = start_provider().await;
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(exporter.layer()));
    let address = provider.local_addr().expect("the provider listens");
    let client = EchoClient::connect(format!("http://{address}"))
        .await
        .unwrap();

    // A call in flight holds shutdown at step 4 (drain inbound).
    let slow = tokio::spawn({
        let mut client = client.clone();
        async move {
            let request = EchoRequest {
                delay_ms: Some(1_000),
                ..EchoRequest::default()
            };
            client.echo(as_consumer(tonic::Request::new(request))).await
        }
    });
    until("the slow call in flight", || {
        provider
            .metrics()
            .encode()
            .contains("rpc_server_requests_in_flight 1")
    })
    .await;
    let shutdown = tokio::spawn(provider.before_shutdown());
    until("the provider refusing new calls", || {
        provider.phase() >= Phase::Rejecting
    })
    .await;

    let status = client
        .clone()
        .echo(traced(EchoRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    slow.await.unwrap().expect("the call in flight is served");
    let report = shutdown.await.unwrap();
    assert_eq!(report.rejected, 1, "{report:?}");
    exporter.shutdown().await.unwrap();

    let spans: Vec<Span> = received
        .0
        .lock()
        .iter()
        .map(|(_, span)| span.clone())
        .collect();
    let call = call_span(&spans, "echo.Echo/Echo");
    assert_eq!(
        attribute(call, "rpc.grpc.status_code").as_deref(),
        Some("14")
    );
    let (step, action) = linked_step(&spans, call);
    assert_eq!(action, "refused");
    assert!(
        ["reject-new", "drain-inbound"].contains(&step.name.as_str()),
        "a step of the shutdown refused it, not {}",
        step.name
    );
    assert_eq!(
        links_to(call, step),
        Some("refused"),
        "the call's span names the step that refused it"
    );
    let shutdown_span = spans
        .iter()
        .find(|span| span.name == "shutdown")
        .expect("the shutdown span");
    assert_eq!(
        step.parent_span_id, shutdown_span.span_id,
        "the step is one of the shutdown's"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_moved_stream_and_the_step_that_moved_it_are_linked() {
    let (received, exporter, provider) = start_provider().await;
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(exporter.layer()));
    let address = provider.local_addr().expect("the provider listens");
    let mut client = FeedClient::connect(format!("http://{address}"))
        .await
        .unwrap();
    let subscribe = SubscribeRequest {
        from: 0,
        until: 1_000,
        interval_ms: 10,
    };
    let mut stream = client
        .subscribe(traced(subscribe))
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().expect("a first event");

    let shutdown = tokio::spawn(provider.before_shutdown());
    let end = loop {
        match stream.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without the moved status"),
            Err(status) => break status,
        }
    };
    assert_eq!(end.code(), tonic::Code::Unavailable, "{end:?}");
    assert!(end.metadata().get("rpc-stream-moved").is_some(), "{end:?}");
    let report = shutdown.await.unwrap();
    assert_eq!(provider.streams_moved(), 1, "{report:?}");
    exporter.shutdown().await.unwrap();

    let spans: Vec<Span> = received
        .0
        .lock()
        .iter()
        .map(|(_, span)| span.clone())
        .collect();
    let call = call_span(&spans, "feed.Feed/Subscribe");
    let (step, action) = linked_step(&spans, call);
    assert_eq!(action, "moved");
    assert_eq!(links_to(call, step), Some("moved"), "both ways");
    let shutdown_span = spans
        .iter()
        .find(|span| span.name == "shutdown")
        .expect("the shutdown span");
    assert_eq!(
        step.parent_span_id, shutdown_span.span_id,
        "one of the shutdown's steps ({}) moved it",
        step.name
    );
}
