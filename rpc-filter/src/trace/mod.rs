//! `tracing` spans per call, on both sides.
//!
//! [`CallTraceLayer`] opens one span per call — `rpc.server` on the provider,
//! `rpc.client` on the consumer, whose attempts the cluster opens as `rpc.attempt`
//! children — with OpenTelemetry's RPC attribute names: `rpc.system`, `rpc.service`,
//! `rpc.method`, `rpc.grpc.status_code` (recorded when the response body ends),
//! `network.peer.address` / `network.peer.port` on the provider, and `otel.name`,
//! `otel.kind` and `otel.status_code`, which tracing-opentelemetry turns into the span's
//! name (`package.Service/Method`), kind and status.
//!
//! The spans are at DEBUG level, as tower-http makes its request spans: a service that
//! logs at INFO builds none (the span macro checks the subscriber's interest once per
//! call site and returns a disabled span, whose fields are never evaluated), while an
//! exporter that asks for DEBUG spans of `lossless_rpc_filter` and
//! `lossless_rpc_cluster` gets them all.

#[cfg(test)]
pub(crate) mod capture;
mod layer;
mod span;
mod span_fields;

pub use layer::{CallTrace, CallTraceLayer};
pub use span::{Side, SpanEnd, call_span};
