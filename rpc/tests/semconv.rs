//! The names our spans and metrics carry, checked against OpenTelemetry's
//! semantic-conventions registry (the `opentelemetry-semantic-conventions` package from
//! PyPI, generated from the conventions' YAML; `tests/python/semconv_check.py` reads it
//! and prints its version).
//!
//! One call through a consumer to a provider under each choice of
//! `tracing.semantic_conventions`: the exported spans' attributes (OTLP, as a back end
//! gets them) and the per-call histograms' labels. `stable` uses only names the registry
//! knows and does not deprecate, and carries the attributes the gRPC conventions require;
//! `old` keeps v1.37's names (deprecated now, known still); `dup` carries both.

mod otlp_receiver;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;

use lossless_rpc::observe::otlp::OtlpExporter;
use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, Config, RpcConventions};
use opentelemetry_proto::tonic::trace::v1::Span;
use otlp_receiver::{attribute, receiver};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc_testkit::external::Need;
use rpc_testkit::services::EchoProvider;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tracing_subscriber::prelude::*;

const CHECKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/python/semconv_check.py"
);

/// What one call under `conventions` showed: its spans (server, client, attempt) and
/// the consumer's and provider's `/metrics` text.
struct Seen {
    spans: Vec<Span>,
    metrics: String,
}

fn config(name: &str, endpoint: &str, conventions: RpcConventions) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.graceful_shutdown.internal_signal = false;
    config.tracing.otlp_endpoint = Some(endpoint.to_owned());
    config.tracing.semantic_conventions = Some(conventions);
    config.admin.port = 0;
    config
}

async fn one_call(conventions: RpcConventions) -> Seen {
    let (received, addr) = receiver().await;
    let endpoint = format!("http://{addr}");
    let consumer_config = config("semconv-consumer", &endpoint, conventions);
    let exporter = OtlpExporter::start(&consumer_config)
        .unwrap()
        .expect("an endpoint is configured");
    let subscriber = tracing_subscriber::registry().with(exporter.layer());
    let _default = tracing::subscriber::set_default(subscriber);

    let hub = MemoryHub::new();
    let mut provider = Application::builder(config("semconv-provider", &endpoint, conventions));
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();
    let mut consumer = Application::builder(consumer_config);
    consumer.registry("default", Arc::new(hub.client()));
    let mut client = EchoClient::new(consumer.reference("echo.Echo"));
    let consumer = consumer.start().await.unwrap();

    client.echo(EchoRequest::default()).await.unwrap();
    // An application's error: the echo provider refuses a delay past its bound.
    let too_long = EchoRequest {
        delay_ms: Some(u32::MAX),
        ..EchoRequest::default()
    };
    let refused = client.echo(too_long).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    exporter.shutdown().await.unwrap();
    let metrics = consumer.metrics().encode() + &provider.metrics().encode();
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
    let spans = received
        .0
        .lock()
        .iter()
        .map(|(_, span)| span.clone())
        .collect();
    Seen { spans, metrics }
}

impl Seen {
    /// The first span named `name` of `kind` (2 server, 3 client): the successful call's.
    fn span(&self, name: &str, kind: i32) -> &Span {
        self.spans
            .iter()
            .find(|span| span.name == name && span.kind == kind)
            .unwrap_or_else(|| panic!("no span {name} of kind {kind}"))
    }

    /// The attempt span whose `rpc.response.status_code` is `status` (`None`: the
    /// successful call's attempt, which ends at its response headers, before the status
    /// in the trailers).
    fn attempt(&self, status: Option<&str>) -> &Span {
        self.spans
            .iter()
            .filter(|span| attribute(span, "rpc.attempt").is_some())
            .find(|span| attribute(span, "rpc.response.status_code").as_deref() == status)
            .unwrap_or_else(|| panic!("an attempt span with status {status:?}"))
    }

    /// Every attribute name in the conventions' namespaces that our spans set.
    fn attribute_names(&self) -> BTreeSet<String> {
        let ours = ["rpc.", "server.", "network.", "error."];
        self.spans
            .iter()
            .flat_map(|span| &span.attributes)
            .map(|attribute| attribute.key.clone())
            // Our own field, not a convention: the attempt's number (gRFC A72).
            .filter(|key| key != "rpc.attempt")
            .filter(|key| ours.iter().any(|prefix| key.starts_with(prefix)))
            .collect()
    }

    /// The per-call duration histograms' names, dotted as the conventions write them
    /// (`rpc_server_call_duration_seconds` is `rpc.server.call.duration` in seconds).
    fn call_metrics(&self) -> BTreeSet<String> {
        self.metrics
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|line| line.strip_suffix("_seconds histogram"))
            .filter(|name| name.ends_with("_call_duration"))
            .map(|name| name.replace('_', "."))
            .collect()
    }

    /// The label names of the per-call duration histograms.
    fn call_labels(&self) -> BTreeSet<String> {
        self.metrics
            .lines()
            .filter(|line| line.starts_with("rpc_server_call_duration_seconds_count{"))
            .chain(
                self.metrics
                    .lines()
                    .filter(|line| line.starts_with("rpc_client_call_duration_seconds_count{")),
            )
            .flat_map(|line| {
                let labels = &line[line.find('{').unwrap() + 1..line.rfind('}').unwrap()];
                labels
                    .split(',')
                    .map(|pair| pair.split_once('=').unwrap().0.to_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The registry's verdict on `seen`'s names (see semconv_check.py).
async fn checked(python: &str, seen: &Seen) -> Value {
    let asked = json!({
        "attributes": seen.attribute_names(),
        "labels": seen.call_labels(),
        "metrics": seen.call_metrics(),
    });
    let mut checker = tokio::process::Command::new(python)
        .arg(CHECKER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the checker starts");
    let mut stdin = checker.stdin.take().unwrap();
    stdin.write_all(asked.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let output = checker.wait_with_output().await.unwrap();
    assert!(output.status.success(), "the checker failed");
    let verdict: Value = serde_json::from_slice(&output.stdout).unwrap();
    println!(
        "registry {} on {asked}: {verdict}",
        verdict["schema_version"]
    );
    assert_eq!(
        asked["metrics"].as_array().map(Vec::len),
        Some(2),
        "both families"
    );
    verdict
}

fn names(verdict: &Value, key: &str) -> Vec<String> {
    serde_json::from_value(verdict[key].clone()).unwrap()
}

// One thread: the subscriber is this thread's default, and every span is made on it.
#[tokio::test(flavor = "current_thread")]
async fn stable_names_are_the_registrys_current_ones() {
    let Some(python) = Need::Python.get("stable_names_are_the_registrys_current_ones") else {
        return;
    };
    let seen = one_call(RpcConventions::Stable).await;
    let verdict = checked(&python, &seen).await;
    for kind in ["attributes", "labels", "metrics"] {
        assert_eq!(
            names(&verdict, &format!("unknown_{kind}")),
            Vec::<String>::new()
        );
        assert_eq!(
            names(&verdict, &format!("deprecated_{kind}")),
            Vec::<String>::new()
        );
    }
    // What the gRPC conventions require, with the values they ask for.
    for span in [
        seen.span("echo.Echo/Echo", 2),
        seen.span("echo.Echo/Echo", 3),
    ] {
        assert_eq!(attribute(span, "rpc.system.name").as_deref(), Some("grpc"));
        assert_eq!(
            attribute(span, "rpc.method").as_deref(),
            Some("echo.Echo/Echo")
        );
        assert_eq!(
            attribute(span, "rpc.response.status_code").as_deref(),
            Some("OK")
        );
        assert_eq!(attribute(span, "rpc.service"), None);
        assert_eq!(attribute(span, "rpc.grpc.status_code"), None);
    }
    let client = seen.span("echo.Echo/Echo", 3);
    assert_eq!(
        attribute(client, "server.address").as_deref(),
        Some("echo.Echo")
    );
    let attempt = seen.attempt(None);
    assert_eq!(
        attribute(attempt, "server.address").as_deref(),
        Some("127.0.0.1")
    );
    assert!(attribute(attempt, "server.port").is_some());
    assert_eq!(
        attribute(attempt, "rpc.method").as_deref(),
        Some("echo.Echo/Echo")
    );
    assert_eq!(attribute(attempt, "error.type"), None);
    let failed = seen.attempt(Some("INVALID_ARGUMENT"));
    assert_eq!(
        attribute(failed, "error.type").as_deref(),
        Some("INVALID_ARGUMENT"),
        "an application's error names the attempt's error as it does the call's"
    );
    assert!(seen.metrics.contains(
        r#"rpc_client_call_duration_seconds_count{rpc_system_name="grpc",rpc_method="echo.Echo/Echo",rpc_response_status_code="OK"} 1"#
    ), "{}", seen.metrics);
}

#[tokio::test(flavor = "current_thread")]
async fn old_names_stay_the_default_and_dup_carries_both() {
    let Some(python) = Need::Python.get("old_names_stay_the_default_and_dup_carries_both") else {
        return;
    };
    assert_eq!(
        Config::default().tracing.semantic_conventions,
        None,
        "unset: OTEL_SEMCONV_STABILITY_OPT_IN decides"
    );
    let old = one_call(RpcConventions::Old).await;
    let verdict = checked(&python, &old).await;
    assert_eq!(names(&verdict, "unknown_attributes"), Vec::<String>::new());
    assert_eq!(names(&verdict, "unknown_labels"), Vec::<String>::new());
    assert_eq!(
        names(&verdict, "deprecated_attributes"),
        ["rpc.grpc.status_code", "rpc.service", "rpc.system"],
        "v1.37's names, deprecated since"
    );
    let server = old.span("echo.Echo/Echo", 2);
    assert_eq!(attribute(server, "rpc.method").as_deref(), Some("Echo"));
    assert_eq!(
        attribute(server, "rpc.grpc.status_code").as_deref(),
        Some("0")
    );

    let dup = one_call(RpcConventions::Dup).await;
    let verdict = checked(&python, &dup).await;
    assert_eq!(names(&verdict, "unknown_attributes"), Vec::<String>::new());
    let server = dup.span("echo.Echo/Echo", 2);
    for (key, value) in [
        ("rpc.system", "grpc"),
        ("rpc.system.name", "grpc"),
        ("rpc.service", "echo.Echo"),
        // The one name in both sets: the stable, fully-qualified value.
        ("rpc.method", "echo.Echo/Echo"),
        ("rpc.grpc.status_code", "0"),
        ("rpc.response.status_code", "OK"),
    ] {
        assert_eq!(attribute(server, key).as_deref(), Some(value), "{key}");
    }
    assert!(dup.metrics.contains(
        r#"rpc_server_call_duration_seconds_count{rpc_system="grpc",rpc_system_name="grpc",rpc_service="echo.Echo",rpc_method="echo.Echo/Echo",rpc_grpc_status_code="0",rpc_response_status_code="OK"} 1"#
    ), "{}", dup.metrics);
}
