//! Per-call duration histograms, on both sides of a call.
//!
//! [`CallMetricsLayer`] times every call from its request until its response body ends
//! — a stream's duration includes its last message, as the in-flight guard counts it —
//! into a [`MethodHistograms`] family labelled by service, method and gRPC status code
//! with OpenTelemetry's attribute names (`rpc_system`, `rpc_service`, `rpc_method`,
//! `rpc_grpc_status_code`), in seconds. The provider's family is
//! `rpc_server_call_duration_seconds`, the consumer's `rpc_client_call_duration_seconds`
//! (`rpc` builds both and registers them with the application's Prometheus registry).
//!
//! What a call costs, with metrics on: two reads of the clock, one lock-free map lookup
//! (its method's series), one reference count, and two relaxed atomic adds; no lock and
//! no allocation after a method's first call ([`DurationHistogram`] says why it is not
//! prometheus-client's own histogram); a call in a sampled trace also becomes its
//! bucket's exemplar (a `try_lock` and a copy), which the OpenMetrics scrape shows
//! (`openmetrics.rs`). Labels are bounded: see [`MethodHistograms`].

mod exemplar;
mod histogram;
mod layer;
mod methods;
mod openmetrics;
mod points;
mod timer;

pub use exemplar::CallExemplar;
pub use histogram::{BUCKETS_SECONDS, DurationHistogram, HistogramSnapshot};
pub use layer::{CallMetrics, CallMetricsLayer};
pub use methods::{LastLabel, MAX_METHODS, MethodHistograms, MethodSeries, OTHER, STATUS_CODE};
pub use points::MethodPoint;
pub use timer::CallTimer;
