//! Where the metrics and trace filters sit on the consumer's side of a call (the
//! provider's whole stack is in `application/provider_stack.rs`).
//!
//! Consumer: access log → metrics and trace → graceful → resumable streams →
//! compression → cluster. The metrics and trace filters are one layer (`CallObserve`: one
//! future and body wrapper per call, not two): the call's duration includes everything
//! below, and the graceful filter and the cluster (its attempt spans) run inside the
//! call's span.

use rpc_cluster::ClusterChannel;
use rpc_cluster::resume::StreamResume;
use rpc_filter::access_log::{AccessLog, AccessLogLayer};
use rpc_filter::compression::ConsumerCompression;
use rpc_filter::graceful::ConsumerGraceful;
use rpc_filter::observe::{CallObserve, CallObserveLayer};
use rpc_filter::trace::CallTraceLayer;
use tower_layer::Layer;

use super::config::TracingConfig;
use super::metrics::Metrics;

/// The channel a reference gives application code: the consumer filters over the
/// cluster. Generated clients take it unchanged: `GreeterClient::new(channel)`.
pub type ReferenceChannel = AccessLog<CallObserve<ConsumerGraceful<ReferenceCore>>>;

/// Below the graceful filter: resumable streams over compression over the cluster.
pub type ReferenceCore = StreamResume<ConsumerCompression<ClusterChannel>>;

/// `graceful` (the reference's graceful filter over its compression filter and its
/// cluster) behind the trace, metrics and access-log filters; each passes calls through
/// when it is off.
pub(crate) fn reference_channel(
    graceful: ConsumerGraceful<ReferenceCore>,
    metrics: &Metrics,
    tracing: &TracingConfig,
    access_log: AccessLogLayer,
) -> ReferenceChannel {
    let trace = if tracing.enabled {
        CallTraceLayer::client().with_conventions(tracing.semantic_conventions())
    } else {
        CallTraceLayer::disabled()
    };
    let observe = CallObserveLayer::new(metrics.client_layer(), trace);
    access_log.layer(observe.layer(graceful))
}
