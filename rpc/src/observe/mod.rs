//! Observing an application: Prometheus metrics and `tracing` spans, on both sides of
//! every call, plus gauges of the lifecycle and the cluster.
//!
//! - [`Metrics`]: one per application (`Application::metrics`), no global registry.
//!   Per-call histograms are the metrics filter of [`filter`](crate::filter) on each
//!   side and one observation per attempt in the cluster; everything the framework
//!   counts anyway (phase, in-flight counters, rejections, connections, cluster
//!   counters, registrations) is read by collectors at scrape time, so it costs no call
//!   anything. [`Metrics::encode`] is the text `GET /metrics` serves.
//! - Spans: the trace filter of [`filter`](crate::filter) opens one per call on each
//!   side, the cluster one per attempt under it; the lifecycle opens one per start-up
//!   and shutdown step.
//! - With the `otlp` feature, `otlp` exports spans to an OpenTelemetry collector.
//!
//! Configured by the `metrics` and `tracing` sections ([`MetricsConfig`],
//! [`TracingConfig`]). docs/observability.md lists every metric with its labels.

mod cluster;
mod config;
mod filters;
mod last_stop;
mod lifecycle;
mod limit;
mod metrics;
#[cfg(feature = "otlp")]
pub mod otlp;
#[cfg(feature = "otlp")]
mod otlp_ids;
#[cfg(feature = "otlp")]
pub mod otlp_metrics;
mod process;
mod provider_gauges;
mod registry;
mod scrape;

pub use config::{AccessLogConfig, MetricsConfig, TracingConfig};
pub use filters::ReferenceChannel;
pub(crate) use filters::reference_channel;
pub use metrics::Metrics;
