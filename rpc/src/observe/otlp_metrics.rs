//! Exporting the call-duration histograms over OTLP/gRPC as well as to the Prometheus
//! scrape (the `otlp` feature, `metrics.otlp_endpoint`).
//!
//! What is exported: `rpc.server.call.duration`, `rpc.client.call.duration` and
//! `rpc.client.attempt.duration`, in seconds, with the attributes of
//! `tracing.semantic_conventions`, cumulative since the exporter started (as the scrape
//! shows them), each bucket with its latest traced call as an exemplar — every
//! `metrics.otlp_interval` and once more at [`OtlpMetricsExporter::shutdown`]. The
//! other metrics (lifecycle, cluster, registries) stay on the scrape.
//!
//! Our histograms are kept without a lock and pre-aggregated (`lossless_rpc_filter::
//! metrics`); OpenTelemetry's SDK can only aggregate measurements it records itself,
//! so the request is built from the histograms here and sent with the OTLP service's
//! own generated client (opentelemetry-proto).
//!
//! ```no_run
//! # async fn demo(app: &lossless_rpc::Application, config: &lossless_rpc::Config) -> Result<(), Box<dyn std::error::Error>> {
//! use lossless_rpc::observe::otlp_metrics::OtlpMetricsExporter;
//! let exporter = OtlpMetricsExporter::start(config, app.metrics())?; // None without an endpoint
//! // ... serve ...
//! if let Some(exporter) = exporter {
//!     exporter.shutdown().await?; // the last figures
//! }
//! # Ok(()) }
//! ```

use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Exemplar, Histogram, HistogramDataPoint, Metric, ResourceMetrics,
    ScopeMetrics, exemplar, metric,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use rpc_filter::metrics::{BUCKETS_SECONDS, MethodPoint};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use super::metrics::Metrics;
use crate::Config;

/// Why metrics could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpMetricsError {
    /// A setting under `metrics` cannot be used (an endpoint that is not an
    /// `http://host:port` URL, an interval of 0): the checks a configuration file gets,
    /// made again for a configuration built in code.
    #[error("metrics.{key}: {reason}")]
    Setting {
        /// The key under `metrics`.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The collector refused or did not answer the last export.
    #[error("exporting the last metrics failed: {0}")]
    Export(String),
}

/// Sends the call histograms of one application's [`Metrics`] to
/// `metrics.otlp_endpoint` every `metrics.otlp_interval`, from a task on the runtime it
/// was started on.
#[derive(Debug)]
pub struct OtlpMetricsExporter {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<(), OtlpMetricsError>>,
}

impl OtlpMetricsExporter {
    /// Starts exporting `metrics` as `config.metrics` says, naming the service
    /// `config.application.name`; `None` when no endpoint is configured or metrics are
    /// off. Call it inside the tokio runtime the application runs on.
    ///
    /// # Errors
    /// [`OtlpMetricsError::Setting`] when the endpoint is not a usable URL or the
    /// interval is 0.
    pub fn start(config: &Config, metrics: &Metrics) -> Result<Option<Self>, OtlpMetricsError> {
        let Some(endpoint) = &config.metrics.otlp_endpoint else {
            return Ok(None);
        };
        if !metrics.is_enabled() {
            return Ok(None);
        }
        config
            .metrics
            .validate()
            .map_err(|(key, reason)| OtlpMetricsError::Setting { key, reason })?;
        let channel = Channel::from_shared(endpoint.clone())
            .map_err(|error| OtlpMetricsError::Setting {
                key: "otlp_endpoint",
                reason: error.to_string(),
            })?
            .connect_lazy();
        let batch = Batch {
            service: config.application.name.clone(),
            started: SystemTime::now(),
            metrics: metrics.clone(),
        };
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(export_every(
            MetricsServiceClient::new(channel),
            batch,
            config.metrics.otlp_interval,
            stopped,
        ));
        Ok(Some(Self { stop, task }))
    }

    /// Stops the periodic export after sending the figures of this moment.
    ///
    /// # Errors
    /// [`OtlpMetricsError::Export`] when that last export failed.
    pub async fn shutdown(self) -> Result<(), OtlpMetricsError> {
        // The task may have ended already (its runtime is going down): nothing to stop.
        let _ = self.stop.send(true);
        self.task
            .await
            .map_err(|error| OtlpMetricsError::Export(error.to_string()))?
    }
}

/// Longest wait for one export, as OpenTelemetry's exporters bound theirs (10 s): a
/// collector that takes the connection and never answers holds neither the next export
/// nor the last one at shutdown past it.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Exports `batch` every `interval` until told to stop, then once more; returns how the
/// last export went. A failed periodic export is logged once per outage (WARN), and its
/// end (INFO): a collector down for an hour is two lines, not one per interval.
async fn export_every(
    mut client: MetricsServiceClient<Channel>,
    batch: Batch,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) -> Result<(), OtlpMetricsError> {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            // The stop first: after a slow export the next tick is ready too, and a
            // random pick could export again before the last one.
            biased;
            // Stopped, or the exporter was dropped: the last figures, then done.
            () = stopped(&mut stop) => break,
            _ = ticks.tick() => match export(&mut client, &batch).await {
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(%error, "exporting metrics over OTLP failed; each export sends them all again (told again when it works)");
                }
                Err(error) => tracing::debug!(%error, "exporting metrics over OTLP failed again"),
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("exporting metrics over OTLP works again");
                }
                Ok(()) => {}
            },
        }
    }
    export(&mut client, &batch).await
}

/// One export of `batch` now, bounded by [`EXPORT_TIMEOUT`].
async fn export(
    client: &mut MetricsServiceClient<Channel>,
    batch: &Batch,
) -> Result<(), OtlpMetricsError> {
    match tokio::time::timeout(EXPORT_TIMEOUT, client.export(batch.request())).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(status)) => Err(OtlpMetricsError::Export(status.to_string())),
        Err(_) => Err(OtlpMetricsError::Export(format!(
            "no answer within {EXPORT_TIMEOUT:?}"
        ))),
    }
}

/// Until told to stop (or the sender is gone); holds no borrow of the channel after.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// What one export sends: the histograms of `metrics`, cumulative since `started`.
struct Batch {
    service: String,
    started: SystemTime,
    metrics: Metrics,
}

impl Batch {
    /// The export request of this moment.
    fn request(&self) -> ExportMetricsServiceRequest {
        let now = unix_nanos(SystemTime::now());
        let start = unix_nanos(self.started);
        let metrics = self
            .metrics
            .call_families()
            .into_iter()
            // A family with no series yet (a consumer's served calls) is left out.
            .filter(|(_, _, points)| !points.is_empty())
            .map(|(name, description, points)| Metric {
                name,
                description: description.to_owned(),
                unit: "s".to_owned(),
                data: Some(metric::Data::Histogram(Histogram {
                    data_points: points
                        .into_iter()
                        .map(|point| data_point(point, start, now))
                        .collect(),
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                })),
                ..Metric::default()
            })
            .collect();
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![text("service.name", &self.service)],
                    ..Resource::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: "lossless-rpc".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..InstrumentationScope::default()
                    }),
                    metrics,
                    ..ScopeMetrics::default()
                }],
                ..ResourceMetrics::default()
            }],
        }
    }
}

/// One series as an OTLP histogram point (bucket counts per bucket, as OTLP counts
/// them, not cumulative as Prometheus does).
fn data_point(point: MethodPoint, start: u64, now: u64) -> HistogramDataPoint {
    let histogram = point.histogram;
    // An exemplar's time is the export's: the call's is not kept (a clock read per
    // call); the same exemplar is sent again until a later call replaces it.
    let exemplars = histogram
        .exemplars
        .iter()
        .flatten()
        .map(|call| Exemplar {
            time_unix_nano: now,
            trace_id: call.trace_id.to_be_bytes().to_vec(),
            span_id: call.span_id.to_be_bytes().to_vec(),
            value: Some(exemplar::Value::AsDouble(call.seconds)),
            ..Exemplar::default()
        })
        .collect();
    HistogramDataPoint {
        attributes: point
            .attributes
            .iter()
            .map(|(key, value)| attribute(key, value))
            .collect(),
        start_time_unix_nano: start,
        time_unix_nano: now,
        count: histogram.count,
        sum: Some(histogram.sum),
        bucket_counts: histogram.buckets.iter().map(|(_, count)| *count).collect(),
        explicit_bounds: BUCKETS_SECONDS.to_vec(),
        exemplars,
        ..HistogramDataPoint::default()
    }
}

/// A point's attribute with the type the conventions give it: `rpc.grpc.status_code`
/// is an int (its Prometheus label is text, as every label is); the others are strings.
fn attribute(key: &str, value: &str) -> KeyValue {
    match (key, value.parse::<i64>()) {
        ("rpc.grpc.status_code", Ok(code)) => KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(code)),
            }),
            ..KeyValue::default()
        },
        _ => text(key, value),
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}

fn unix_nanos(time: SystemTime) -> u64 {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grpc_status_code_is_an_int_and_the_rest_are_strings() {
        let value = |kv: KeyValue| kv.value.and_then(|value| value.value);
        assert_eq!(
            value(attribute("rpc.grpc.status_code", "5")),
            Some(any_value::Value::IntValue(5))
        );
        assert_eq!(
            value(attribute("rpc.method", "Echo")),
            Some(any_value::Value::StringValue("Echo".into()))
        );
        assert_eq!(
            value(attribute("rpc.response.status_code", "NOT_FOUND")),
            Some(any_value::Value::StringValue("NOT_FOUND".into()))
        );
    }
}
