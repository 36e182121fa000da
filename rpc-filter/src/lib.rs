//! # lossless-rpc-filter
//!
//! Tower layers that sit on the request path of `lossless-rpc`, on both sides of a
//! call. Each is an ordinary `tower::Layer`, so users can stack their own next to ours.
//!
//! - [`graceful::ProviderGracefulLayer`]: the provider side of graceful offline — counts
//!   inbound requests until their response body ends, marks responses `rpc-closing` once
//!   shutdown has begun, and refuses new requests as "closing, not executed" from step 3
//!   on.
//! - [`graceful::ConsumerGracefulLayer`]: the consumer side — counts outbound calls until
//!   their response body ends, and refuses new calls once outbound has been drained.
//! - [`limit::ConcurrencyLimitLayer`]: the provider's adaptive concurrency limit —
//!   refuses the excess of an overload at once as `RESOURCE_EXHAUSTED`, "overloaded, not
//!   executed".
//! - [`metrics::CallMetricsLayer`]: call durations by service, method and gRPC status,
//!   into Prometheus histograms, on either side.
//! - [`trace::CallTraceLayer`]: one `tracing` span per call, on either side.
//! - [`observe::CallObserveLayer`]: the metrics and trace filters as one layer (one
//!   future and body wrapper per call instead of two), as rpc stacks them.
//! - [`access_log::AccessLogLayer`]: one JSON line per call, on either side (off by
//!   default).
//! - [`compression::ProviderCompressionLayer`], [`compression::ConsumerCompressionLayer`]:
//!   gzip and zstd message compression per service and per reference, on the gRPC
//!   framing (tonic's generated servers and clients compress only when told in code).
//!
//! The last two watch a call until its response body ends with [`call_end`]; the first
//! and the limit refuse a request without running it in one way, [`NotExecuted`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access_log;
pub mod call_end;
pub mod compression;
pub mod graceful;
mod grpc_path;
pub mod limit;
pub mod metrics;
pub mod observe;
mod refusal;
pub mod trace;

pub use grpc_path::split_path;
pub use refusal::{DRAIN_LIMIT, DRAIN_WAIT, NotExecuted, RefusalFuture};
