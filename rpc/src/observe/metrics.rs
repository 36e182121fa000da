//! `Metrics`: the application's Prometheus registry, what feeds it, and its text.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry as PrometheusRegistry;
use rpc_cluster::{AttemptObserver, ClusterChannel, FailureKind};
use rpc_core::{Registry, RpcConventions};
use rpc_filter::limit::ConcurrencyLimiter;
#[cfg(feature = "otlp")]
use rpc_filter::metrics::MethodPoint;
use rpc_filter::metrics::{CallMetricsLayer, LastLabel, MethodHistograms, STATUS_CODE};
use rpc_lifecycle::Lifecycle;

use super::cluster::ReferencesCollector;
use super::config::MetricsConfig;
use super::last_stop::LastStopFile;
use super::lifecycle::LifecycleCollector;
use super::limit::LimitCollector;
use super::process::ProcessCollector;
use super::provider_gauges::ServerCollector;
use super::registry::RegistryOperations;

/// The outcomes of an attempt: `answered`, then each failure kind in the order of
/// [`FailureKind::index`] (offset by one).
const OUTCOMES: &[&str] = &[
    "answered",
    "rejected",
    "not_sent",
    "unavailable",
    "transport",
    "timeout",
    "overloaded",
];

/// The `outcome` label of attempt durations: our own, the same under every convention.
const ATTEMPT_OUTCOME: LastLabel = LastLabel {
    name: "outcome",
    values: OUTCOMES,
    stable_name: "outcome",
    stable_values: OUTCOMES,
};

/// One application's metrics: Prometheus' registry (no global one) with the per-call
/// histograms of both sides, and collectors that read the lifecycle, the cluster's
/// references and the registries at scrape time.
///
/// Built by the application builder; read it with [`Metrics::encode`], which is what
/// `GET /metrics` serves. Cheap to clone; clones share everything. The "Metrics"
/// section of docs/observability.md lists every metric.
#[derive(Clone)]
pub struct Metrics {
    /// `None` when metrics are off.
    instruments: Option<Arc<Instruments>>,
    /// Where this process records its stop (`metrics.last_stop_file`).
    last_stop: Option<Arc<LastStopFile>>,
}

struct Instruments {
    registry: PrometheusRegistry,
    server_calls: Arc<MethodHistograms>,
    client_calls: Arc<MethodHistograms>,
    attempts: Arc<AttemptDurations>,
    references: Arc<ReferencesCollector>,
    registry_operations: Arc<RegistryOperations>,
    limit: Arc<LimitCollector>,
}

impl Metrics {
    /// The `Content-Type` of [`Metrics::encode`]'s text (Prometheus text format 0.0.4).
    pub const CONTENT_TYPE: &'static str =
        prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

    /// The `Content-Type` of [`Metrics::encode_openmetrics`]'s text (OpenMetrics 1.0).
    pub const OPENMETRICS_CONTENT_TYPE: &'static str =
        "application/openmetrics-text; version=1.0.0; charset=utf-8";

    /// The metrics of the application run by `lifecycle`, or none when
    /// `config.enabled` is false; the per-call histograms' labels are named as
    /// `conventions` chooses (`tracing.semantic_conventions`).
    pub fn new(config: &MetricsConfig, lifecycle: &Lifecycle, conventions: RpcConventions) -> Self {
        let last_stop = config
            .last_stop_file
            .as_deref()
            .map(|path| Arc::new(LastStopFile::new(path, lifecycle.name())));
        if !config.enabled {
            return Self {
                instruments: None,
                last_stop,
            };
        }
        let server_calls = Arc::new(
            MethodHistograms::new(
                "rpc_server_call_duration",
                "Calls served, from request to the end of the response, by method and status.",
                STATUS_CODE,
            )
            .with_conventions(conventions),
        );
        let client_calls = Arc::new(MethodHistograms::new(
            "rpc_client_call_duration",
            "Calls made, from request to the end of the response (all attempts), by method and status.",
            STATUS_CODE,
        ).with_conventions(conventions));
        let attempts = Arc::new(AttemptDurations(MethodHistograms::new(
            "rpc_client_attempt_duration",
            "Attempts of calls made, from sending to the response headers or the failure, by method and outcome.",
            ATTEMPT_OUTCOME,
        ).with_conventions(conventions)));
        let references = Arc::new(ReferencesCollector::new(lifecycle.outbound().clone()));
        let registry_operations = Arc::new(RegistryOperations::default());
        let limit = Arc::new(LimitCollector::default());

        let mut registry = PrometheusRegistry::default();
        registry.register_collector(Box::new(LifecycleCollector::new(lifecycle.clone())));
        registry.register_collector(Box::new(ServerCollector::new(lifecycle.clone())));
        registry.register_collector(Box::new(limit.clone()));
        registry.register_collector(Box::new(references.clone()));
        registry.register_collector(Box::new(registry_operations.clone()));
        registry.register_collector(Box::new(ProcessCollector::new(lifecycle.name())));
        if let Some(path) = &config.last_stop_file {
            let reader = LastStopFile::new(path, lifecycle.name());
            registry.register_collector(Box::new(reader));
        }
        Self {
            instruments: Some(Arc::new(Instruments {
                registry,
                server_calls,
                client_calls,
                attempts,
                references,
                registry_operations,
                limit,
            })),
            last_stop,
        }
    }

    /// No metrics: nothing is timed or counted, and [`Metrics::encode`] is empty.
    pub fn disabled() -> Self {
        Self {
            instruments: None,
            last_stop: None,
        }
    }

    /// Records `report` as this process's stop in `metrics.last_stop_file`, if one is
    /// configured (see `last_stop.rs`); the application does it when its sequence ends.
    pub(crate) fn record_stop(&self, report: &rpc_lifecycle::ShutdownReport) {
        if let Some(file) = &self.last_stop {
            file.record(report);
        }
    }

    /// Whether metrics are kept.
    pub fn is_enabled(&self) -> bool {
        self.instruments.is_some()
    }

    /// Every metric now, in the Prometheus text format ([`Metrics::CONTENT_TYPE`]): what
    /// `GET /metrics` returns. Values kept elsewhere (phase, in-flight counters, cluster
    /// counters, connections) are read at this moment; nothing waits.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if let Some(instruments) = &self.instruments
            && let Err(error) = instruments.encode_prometheus(&mut text)
        {
            tracing::warn!(%error, "encoding metrics failed; the scrape is cut short");
        }
        text
    }

    /// Every metric now, in the OpenMetrics text format
    /// ([`Metrics::OPENMETRICS_CONTENT_TYPE`]): what `GET /metrics` returns to a scraper
    /// that asks for it (`Accept: application/openmetrics-text`). The same metrics as
    /// [`Metrics::encode`], and each bucket of the call-duration histograms carries the
    /// latest traced call that landed in it as an exemplar (`trace_id`, `span_id`). Empty
    /// when metrics are off.
    pub fn encode_openmetrics(&self) -> String {
        let mut text = String::new();
        if let Some(instruments) = &self.instruments
            && let Err(error) = instruments.encode_openmetrics(&mut text)
        {
            tracing::warn!(%error, "encoding metrics failed; the scrape is cut short");
        }
        text
    }

    /// The provider-side call-duration filter (a pass-through when metrics are off).
    pub(crate) fn server_layer(&self) -> CallMetricsLayer {
        self.instruments
            .as_ref()
            .map_or_else(CallMetricsLayer::disabled, |instruments| {
                CallMetricsLayer::new(instruments.server_calls.clone())
            })
    }

    /// The consumer-side call-duration filter (a pass-through when metrics are off).
    pub(crate) fn client_layer(&self) -> CallMetricsLayer {
        self.instruments
            .as_ref()
            .map_or_else(CallMetricsLayer::disabled, |instruments| {
                CallMetricsLayer::new(instruments.client_calls.clone())
            })
    }

    /// `channel`, its attempts timed and its cluster read at each scrape.
    pub(crate) fn observe_reference(&self, channel: ClusterChannel) -> ClusterChannel {
        let Some(instruments) = &self.instruments else {
            return channel;
        };
        let channel = channel.with_attempt_observer(instruments.attempts.clone());
        instruments.references.add(channel.clone());
        channel
    }

    /// Reads the provider's concurrency limit at each scrape.
    pub(crate) fn observe_limiter(&self, limiter: &ConcurrencyLimiter) {
        if let Some(instruments) = &self.instruments {
            instruments.limit.set(limiter.clone());
        }
    }

    /// `registry`, its operations counted under `name` (its key under `registries`).
    pub(crate) fn observe_registry(
        &self,
        name: &str,
        registry: Arc<dyn Registry>,
    ) -> Arc<dyn Registry> {
        match &self.instruments {
            Some(instruments) => instruments.registry_operations.meter(name, registry),
            None => registry,
        }
    }
}

impl Metrics {
    /// The call-duration families as OpenTelemetry names them, with what each measures
    /// and its series now (for the OTLP export); none when metrics are off.
    #[cfg(feature = "otlp")]
    pub(crate) fn call_families(&self) -> Vec<(String, &'static str, Vec<MethodPoint>)> {
        let Some(instruments) = &self.instruments else {
            return Vec::new();
        };
        instruments
            .call_histograms()
            .into_iter()
            .map(|histograms| {
                (
                    histograms.otel_name(),
                    histograms.description(),
                    histograms.points(),
                )
            })
            .collect()
    }
}

impl Instruments {
    /// The per-call histograms are written apart from the registry's collectors: in
    /// OpenMetrics they carry exemplars, which a collector cannot give prometheus-client
    /// (`rpc_filter`'s `openmetrics.rs`).
    fn call_histograms(&self) -> [&MethodHistograms; 3] {
        [&self.server_calls, &self.client_calls, &self.attempts.0]
    }

    fn encode_prometheus(&self, text: &mut String) -> fmt::Result {
        prometheus_client::encoding::prometheus_text::encode(text, &self.registry)?;
        let mut calls = PrometheusRegistry::default();
        calls.register_collector(Box::new(self.server_calls.clone()));
        calls.register_collector(Box::new(self.client_calls.clone()));
        calls.register_collector(Box::new(self.attempts.clone()));
        prometheus_client::encoding::prometheus_text::encode(text, &calls)
    }

    fn encode_openmetrics(&self, text: &mut String) -> fmt::Result {
        prometheus_client::encoding::text::encode_registry(text, &self.registry)?;
        for histograms in self.call_histograms() {
            histograms.write_openmetrics(text)?;
        }
        prometheus_client::encoding::text::encode_eof(text)
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("enabled", &self.is_enabled())
            .finish_non_exhaustive()
    }
}

/// Attempt durations by method and outcome, fed by every reference's cluster.
#[derive(Debug)]
struct AttemptDurations(MethodHistograms);

impl AttemptObserver for AttemptDurations {
    fn attempt_ended(&self, path: &str, failure: Option<FailureKind>, duration: Duration) {
        let outcome = failure.map_or(0, |kind| kind.index() + 1);
        self.0.observe(path, outcome, duration);
    }
}

impl prometheus_client::collector::Collector for AttemptDurations {
    fn encode(
        &self,
        encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), fmt::Error> {
        self.0.encode(encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attempt_outcomes_follow_the_failure_kinds() {
        for kind in FailureKind::ALL {
            assert_eq!(ATTEMPT_OUTCOME.values[kind.index() + 1], kind.as_str());
        }
    }

    #[test]
    fn disabled_metrics_encode_nothing() {
        let lifecycle = Lifecycle::new("t", rpc_lifecycle::ShutdownConfig::default());
        let metrics = Metrics::new(
            &MetricsConfig {
                enabled: false,
                ..MetricsConfig::default()
            },
            &lifecycle,
            RpcConventions::Old,
        );
        assert!(!metrics.is_enabled());
        assert_eq!(metrics.encode(), "");
        let text =
            Metrics::new(&MetricsConfig::default(), &lifecycle, RpcConventions::Old).encode();
        assert!(
            text.contains("rpc_lifecycle_phase{phase=\"created\"} 1"),
            "{text}"
        );
    }
}
