//! The call histograms exported over OTLP/gRPC (`metrics.otlp_endpoint`): an in-process
//! OTLP metrics receiver (a tonic server implementing OpenTelemetry's `MetricsService`)
//! gets `rpc.server.call.duration` every interval and once more at shutdown, with the
//! current conventions' attributes, per-bucket counts that add up to the count, and the
//! traced call as the exemplar of its bucket.

use std::sync::Arc;
use std::time::Duration;

use lossless_rpc::observe::otlp_metrics::OtlpMetricsExporter;
use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, Config, RpcConventions};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::{HistogramDataPoint, Metric, metric};
use parking_lot::Mutex;
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc_testkit::services::EchoProvider;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Every export request the receiver was sent.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<ExportMetricsServiceRequest>>>);

#[tonic::async_trait]
impl MetricsService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.lock().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

async fn receiver() -> (Received, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let server = tonic::transport::Server::builder()
        .add_service(MetricsServiceServer::new(received.clone()))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener));
    tokio::spawn(server);
    (received, addr)
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(
            |attribute| match attribute.value.as_ref()?.value.as_ref()? {
                Value::StringValue(text) => Some(text.clone()),
                _ => None,
            },
        )
}

/// The served calls' histogram points of `request`.
fn served(request: &ExportMetricsServiceRequest) -> Vec<(Metric, HistogramDataPoint)> {
    let metrics = request
        .resource_metrics
        .iter()
        .flat_map(|resource| &resource.scope_metrics)
        .flat_map(|scope| &scope.metrics)
        .filter(|metric| metric.name == "rpc.server.call.duration");
    let mut points = Vec::new();
    for metric in metrics {
        if let Some(metric::Data::Histogram(histogram)) = &metric.data {
            for point in &histogram.data_points {
                points.push((metric.clone(), point.clone()));
            }
        }
    }
    points
}

#[tokio::test]
async fn the_call_histograms_reach_an_otlp_collector_with_their_exemplars() {
    let (received, addr) = receiver().await;
    let mut config = Config::default();
    config.application.name = "otlp-metrics".into();
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    config.metrics.otlp_endpoint = Some(format!("http://{addr}"));
    config.metrics.otlp_interval = Duration::from_millis(50);
    config.tracing.semantic_conventions = Some(RpcConventions::Stable);
    let hub = MemoryHub::new();
    let mut provider = Application::builder(config.clone());
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();
    let exporter = OtlpMetricsExporter::start(&config, provider.metrics())
        .unwrap()
        .expect("an endpoint is configured");

    let address = provider.local_addr().expect("the provider listens");
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

    // A periodic export carries the call (bounded wait, looked at every few ms).
    tokio::time::timeout(Duration::from_secs(10), async {
        while !received
            .0
            .lock()
            .iter()
            .any(|request| !served(request).is_empty())
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("a periodic export within 10 s");
    let periodic = received.0.lock().len();
    exporter.shutdown().await.expect("the last export");
    let requests = received.0.lock().clone();
    assert!(requests.len() > periodic, "one more export at shutdown");

    let last = requests.last().unwrap();
    let resource = last.resource_metrics[0].resource.as_ref().unwrap();
    assert_eq!(
        text(&resource.attributes, "service.name").as_deref(),
        Some("otlp-metrics")
    );
    let points = served(last);
    assert_eq!(points.len(), 1, "one method, one status: {points:?}");
    let (metric, point) = &points[0];
    assert_eq!(metric.unit, "s");
    assert_eq!(
        text(&point.attributes, "rpc.system.name").as_deref(),
        Some("grpc")
    );
    assert_eq!(
        text(&point.attributes, "rpc.method").as_deref(),
        Some("echo.Echo/Echo")
    );
    assert_eq!(
        text(&point.attributes, "rpc.response.status_code").as_deref(),
        Some("OK")
    );
    assert_eq!(point.count, 1);
    assert_eq!(
        point.bucket_counts.iter().sum::<u64>(),
        1,
        "per-bucket counts"
    );
    assert_eq!(point.bucket_counts.len(), point.explicit_bounds.len() + 1);
    assert!(point.start_time_unix_nano > 0 && point.start_time_unix_nano <= point.time_unix_nano);
    assert_eq!(point.exemplars.len(), 1, "{point:?}");
    let trace_id: String = point.exemplars[0]
        .trace_id
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(trace_id, TRACE_ID, "the call's trace");
    provider.before_shutdown().await;
}

#[tokio::test]
async fn settings_built_in_code_are_checked_at_start() {
    let metrics_on = |tweak: fn(&mut Config)| {
        let mut config = Config::default();
        config.metrics.otlp_endpoint = Some("http://127.0.0.1:4317".into());
        tweak(&mut config);
        config
    };
    let lifecycle = lossless_rpc::Lifecycle::new("t", Default::default());
    let metrics =
        lossless_rpc::Metrics::new(&Config::default().metrics, &lifecycle, RpcConventions::Old);
    let zero = metrics_on(|config| config.metrics.otlp_interval = Duration::ZERO);
    let error = OtlpMetricsExporter::start(&zero, &metrics).unwrap_err();
    assert!(
        error.to_string().contains("metrics.otlp_interval"),
        "{error}"
    );
    let bare = metrics_on(|config| config.metrics.otlp_endpoint = Some("127.0.0.1:4317".into()));
    let error = OtlpMetricsExporter::start(&bare, &metrics).unwrap_err();
    assert!(
        error.to_string().contains("metrics.otlp_endpoint"),
        "{error}"
    );
}

// The clock is paused: a collector that never answers costs the test no real wait, and
// the bound is what ends the export.
#[tokio::test(start_paused = true)]
async fn a_collector_that_never_answers_holds_nothing_past_the_export_bound() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Takes every connection and never says a word.
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            connections.push(connection);
        }
    });
    let mut config = Config::default();
    config.metrics.otlp_endpoint = Some(format!("http://{addr}"));
    config.metrics.otlp_interval = Duration::from_millis(100);
    let lifecycle = lossless_rpc::Lifecycle::new("t", Default::default());
    let metrics = lossless_rpc::Metrics::new(&config.metrics, &lifecycle, RpcConventions::Old);
    let exporter = OtlpMetricsExporter::start(&config, &metrics)
        .unwrap()
        .expect("an endpoint");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = tokio::time::Instant::now();
    let error = exporter.shutdown().await.expect_err("no answer");
    assert!(error.to_string().contains("no answer within"), "{error}");
    // The periodic export under way and the last one, each bounded (10 s).
    assert!(
        started.elapsed() <= Duration::from_secs(21),
        "{:?}",
        started.elapsed()
    );
    held.abort();
}
