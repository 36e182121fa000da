//! Metrics that join traces: `GET /metrics` asked for OpenMetrics (as Prometheus asks)
//! gives each call-duration bucket the latest traced call that landed in it as an
//! exemplar, and the Prometheus Python client's strict OpenMetrics parser reads the
//! whole scrape; asked for nothing, the Prometheus text format, without exemplars.

use std::process::Stdio;
use std::sync::Arc;

use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, Config};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc_testkit::external::Need;
use rpc_testkit::http;
use rpc_testkit::services::EchoProvider;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

const PARSER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/python/openmetrics_exemplars.py"
);
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The exemplars the Python parser finds in `scrape`.
async fn parsed_exemplars(python: &str, scrape: &str) -> Vec<Value> {
    let mut parser = tokio::process::Command::new(python)
        .arg(PARSER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the parser starts");
    let mut stdin = parser.stdin.take().unwrap();
    stdin.write_all(scrape.as_bytes()).await.unwrap();
    drop(stdin);
    let output = parser.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "the parser refused the scrape:\n{scrape}"
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn a_traced_calls_bucket_names_its_trace_in_openmetrics() {
    let Some(python) = Need::Python.get("a_traced_calls_bucket_names_its_trace_in_openmetrics")
    else {
        return;
    };
    let mut config = Config::default();
    config.application.name = "exemplars".into();
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    let hub = MemoryHub::new();
    let mut provider = Application::builder(config);
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();
    let address = provider.local_addr().expect("the provider listens");
    let admin = provider.admin_addr().expect("the admin endpoint");

    let mut client = EchoClient::connect(format!("http://{address}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(EchoRequest::default());
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-00f067aa0ba902b7-01")
            .parse()
            .unwrap(),
    );
    client.echo(request).await.unwrap();

    let host = admin.to_string();
    let openmetrics = http::request_as(
        admin,
        "GET",
        "/metrics",
        &[
            ("host", host.as_str()),
            (
                "accept",
                "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3",
            ),
        ],
        "",
    )
    .await
    .unwrap();
    assert_eq!(openmetrics.status, 200, "{openmetrics:?}");
    assert_eq!(
        openmetrics.content_type.as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(
        openmetrics.body.ends_with("# EOF\n"),
        "{}",
        openmetrics.body
    );
    let exemplars = parsed_exemplars(&python, &openmetrics.body).await;
    let served: Vec<_> = exemplars
        .iter()
        .filter(|exemplar| exemplar["family"] == "rpc_server_call_duration_seconds")
        .collect();
    assert_eq!(
        served.len(),
        1,
        "one traced call, one bucket: {exemplars:?}"
    );
    assert_eq!(served[0]["trace_id"], TRACE_ID, "the caller's trace");
    let span_id = served[0]["span_id"].as_str().unwrap();
    assert_eq!(span_id.len(), 16);
    assert_ne!(
        span_id, "00f067aa0ba902b7",
        "the provider's own span, not the caller's"
    );
    assert!(served[0]["value"].as_f64().unwrap() > 0.0);

    let plain = http::get(admin, "/metrics").await.unwrap();
    assert_eq!(plain.status, 200);
    assert!(
        plain
            .content_type
            .as_deref()
            .unwrap_or("")
            .starts_with("text/plain"),
        "{plain:?}"
    );
    assert!(
        plain
            .body
            .contains("rpc_server_call_duration_seconds_count{"),
        "the same histograms: {}",
        plain.body
    );
    assert!(
        !plain.body.contains(TRACE_ID),
        "no exemplars in the Prometheus text format"
    );
    provider.before_shutdown().await;
}
