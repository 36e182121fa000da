//! What the metrics and trace filters cost per request in heap allocations, counted
//! with dhat: none once a method has been seen (for the trace filter, with no subscriber
//! listening, the usual case of a service that logs at INFO). Each figure is the difference between the same requests
//! sent through the filter and straight to the service it wraps, so allocations of the
//! request, the runtime and the service itself cancel out.
//!
//! The service is cloned for every request, as a generated client does (the consumer),
//! and as the provider's server does for a stack that is not ready (rpc-transport's
//! `connection_service.rs`; a ready one it calls in place): the costlier case. (A test binary of
//! its own: dhat allows one profiler per process at a time.)

use std::convert::Infallible;

use http::{Request, Response};
use lossless_rpc_filter::metrics::{CallMetricsLayer, MethodHistograms, STATUS_CODE};
use lossless_rpc_filter::observe::CallObserveLayer;
use lossless_rpc_filter::trace::CallTraceLayer;
use tonic::body::Body;
use tower::service_fn;
use tower_layer::Layer;

mod common;

use common::allocations_per_request;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

#[test]
fn the_metrics_and_trace_filters_add_no_allocation() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let inner = service_fn(|_request: Request<Body>| async {
        let reply = http_body_util::Full::new(bytes::Bytes::from_static(b"reply"));
        Ok::<_, Infallible>(Response::new(Body::new(reply)))
    });
    let histograms = std::sync::Arc::new(MethodHistograms::new("cost", "Cost.", STATUS_CODE));

    let plain = allocations_per_request(&runtime, inner);
    let both = CallObserveLayer::new(
        CallMetricsLayer::new(histograms.clone()),
        CallTraceLayer::server(),
    )
    .layer(inner);
    let through_both = allocations_per_request(&runtime, both);
    let metrics = CallMetricsLayer::new(histograms).layer(inner);
    let through_metrics = allocations_per_request(&runtime, metrics);
    let trace = CallTraceLayer::server().layer(inner);
    let through_trace = allocations_per_request(&runtime, trace);
    println!(
        "heap blocks per request: plain {plain}, metrics filter {through_metrics}, \
         trace filter {through_trace}, both as one layer {through_both}"
    );
    assert_eq!(through_metrics - plain, 0, "metrics filter");
    assert_eq!(through_trace - plain, 0, "trace filter");
    assert_eq!(through_both - plain, 0, "both as one layer");
}
