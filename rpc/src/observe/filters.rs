//! Where the metrics and trace filters sit on each side of a call.
//!
//! Provider: access log → metrics and trace → graceful → routes. Consumer: access log →
//! metrics and trace → graceful → compression → cluster. The metrics and trace filters
//! are one layer (`CallObserve`: one future and body wrapper per call, not two): the
//! call's duration includes everything below, and the graceful filter and the cluster
//! (its attempt spans) run inside the call's span.

use std::convert::Infallible;

use http::{Request, Response};
use hyper::body::Incoming;
use rpc_cluster::ClusterChannel;
use rpc_cluster::resume::StreamResume;
use rpc_filter::access_log::{AccessLog, AccessLogLayer};
use rpc_filter::compression::ConsumerCompression;
use rpc_filter::graceful::{ConsumerGraceful, ServedBody};
use rpc_filter::observe::{CallObserve, CallObserveLayer};
use rpc_filter::trace::CallTraceLayer;
use rpc_lifecycle::BoxHttpService;
use tonic::body::Body as TonicBody;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
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
        CallTraceLayer::client()
    } else {
        CallTraceLayer::disabled()
    };
    let observe = CallObserveLayer::new(metrics.client_layer(), trace);
    access_log.layer(observe.layer(graceful))
}

/// `graceful` (the provider's graceful filter over its routes) behind the access-log,
/// metrics and trace filters when any is on; with all off the service is `graceful`
/// alone. Either way the response body, wrappers in wrappers, is boxed once into
/// tonic's body type here.
pub(crate) fn provider_service<S>(
    graceful: S,
    metrics: &Metrics,
    tracing: &TracingConfig,
    access_log: Option<AccessLogLayer>,
) -> BoxHttpService
where
    S: tower::Service<Request<Incoming>, Response = Response<ServedBody>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    if !metrics.is_enabled() && !tracing.enabled && access_log.is_none() {
        return boxed(graceful);
    }
    let trace = if tracing.enabled {
        CallTraceLayer::server()
    } else {
        CallTraceLayer::disabled()
    };
    let observed = CallObserveLayer::new(metrics.server_layer(), trace).layer(graceful);
    // An access log that is off is left out rather than passed through: each layer is
    // one more future and body wrapper per call.
    match access_log {
        Some(access_log) => boxed(access_log.layer(observed)),
        None => boxed(observed),
    }
}

/// `service` as the lifecycle serves it: its future and its response body boxed, once.
fn boxed<S, B>(service: S) -> BoxHttpService
where
    S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = hyper::body::Bytes> + Send + 'static,
    B::Error: Into<rpc_core::BoxError>,
{
    BoxCloneSyncService::new(service.map_response(|response| response.map(TonicBody::new)))
}
