//! Exporting spans to an OpenTelemetry collector over OTLP/gRPC (the `otlp` feature).
//!
//! The framework's spans are `tracing` spans; [`OtlpExporter::layer`] is a
//! `tracing-subscriber` layer (tracing-opentelemetry's) that turns them into
//! OpenTelemetry spans and hands them to a batching exporter (opentelemetry-otlp over
//! tonic) bound for `tracing.otlp_endpoint`. The application installs it next to its
//! log output, since the subscriber is the application's:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tracing_subscriber::prelude::*;
//!
//! let config = lossless_rpc::Config::from_file("provider.yaml")?;
//! let exporter = lossless_rpc::observe::otlp::OtlpExporter::start(&config)?; // None without an endpoint
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer().with_filter(tracing_subscriber::EnvFilter::from_default_env()))
//!     .with(exporter.as_ref().map(|exporter| exporter.layer()))
//!     .init();
//! // ... build and run the application ...
//! if let Some(exporter) = exporter {
//!     exporter.shutdown().await?; // exports what is still buffered
//! }
//! # Ok(()) }
//! ```
//!
//! Exported call spans carry the ids the calls carry on the wire (W3C `traceparent`): a
//! provider's call span is exported under its caller's span, with the ids its handler
//! sees in `CallContext` and its log lines show, and a consumer's attempt sends the ids of
//! its exported span — so a trace crosses every process, ours or any other that speaks
//! W3C Trace Context.
//!
//! The layer carries its own filter: every span at INFO and above, and the DEBUG spans
//! of this framework's crates (a span per call and per attempt, see
//! `lossless_rpc::filter::trace`), whatever level the log output uses — so give the log
//! layer its own filter too (as above), not a global one, or it would hide the DEBUG
//! call spans from this layer.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::registry::LookupSpan;

use super::otlp_ids::{CallIds, OtelSpans};
use crate::Config;

/// Why spans cannot be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The exporter could not be built from `tracing.otlp_endpoint`.
    #[error("tracing.otlp_endpoint `{endpoint}`: {source}")]
    Build {
        /// The configured endpoint.
        endpoint: String,
        /// opentelemetry-otlp's error.
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// The SDK's shutdown failed: the last batch was not sent within its bound (5 s,
    /// e.g. a collector that takes the connection and never answers). A collector that
    /// is not there at all is not reported: OpenTelemetry's batch processor drops a
    /// batch it cannot send and says so only in its own internal log.
    #[error("exporting the last spans failed: {0}")]
    Shutdown(String),
}

/// An OTLP/gRPC span exporter bound for `tracing.otlp_endpoint`, with its batch of
/// spans not yet sent. Spans are sent in batches (every 5 s, or 512 spans, as
/// OpenTelemetry's SDK does by default) from a thread of the SDK's own.
#[derive(Debug)]
pub struct OtlpExporter {
    provider: SdkTracerProvider,
}

impl OtlpExporter {
    /// Starts exporting to `config.tracing.otlp_endpoint`, naming the service
    /// `config.application.name`; `None` when no endpoint is configured. Call it inside
    /// the tokio runtime the application runs on: the gRPC channel lives there.
    ///
    /// # Errors
    /// [`OtlpError::Build`] when the endpoint is not usable.
    pub fn start(config: &Config) -> Result<Option<Self>, OtlpError> {
        let Some(endpoint) = &config.tracing.otlp_endpoint else {
            return Ok(None);
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|source| OtlpError::Build {
                endpoint: endpoint.clone(),
                source,
            })?;
        let resource = Resource::builder()
            .with_service_name(config.application.name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .with_id_generator(CallIds::default())
            .build();
        // Exported call spans carry the ids the wire carries (otlp_ids.rs).
        rpc_core::exported_spans::export_spans_with(&OtelSpans);
        Ok(Some(Self { provider }))
    }

    /// The `tracing-subscriber` layer that exports spans through this exporter, with
    /// its own filter (see the module docs).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.provider.tracer("rpc");
        let ours = Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("lossless_rpc_filter", LevelFilter::DEBUG)
            .with_target("lossless_rpc_cluster", LevelFilter::DEBUG)
            .with_target("lossless_rpc_core", LevelFilter::DEBUG);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(ours)
    }

    /// Sends every span finished so far, now.
    ///
    /// # Errors
    /// [`OtlpError::Shutdown`] when the collector did not take them.
    pub async fn flush(&self) -> Result<(), OtlpError> {
        let provider = self.provider.clone();
        // The SDK blocks the calling thread until its export thread is done; the export
        // itself runs on this runtime (the gRPC channel), so block another thread.
        tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .map_err(|error| OtlpError::Shutdown(error.to_string()))?
            .map_err(|error| OtlpError::Shutdown(error.to_string()))
    }

    /// Exports what is still buffered and stops the exporter; spans ended later are
    /// dropped.
    ///
    /// # Errors
    /// [`OtlpError::Shutdown`] when the SDK reports the last spans were not exported
    /// (see there: a missing collector is not reported).
    pub async fn shutdown(self) -> Result<(), OtlpError> {
        let provider = self.provider;
        tokio::task::spawn_blocking(move || provider.shutdown())
            .await
            .map_err(|error| OtlpError::Shutdown(error.to_string()))?
            .map_err(|error| OtlpError::Shutdown(error.to_string()))
    }
}
