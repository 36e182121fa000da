//! What the graceful filters cost per request in heap allocations, counted with dhat:
//! the provider filter adds exactly one (the request's `DrainNotice`, boxed into its
//! extensions, whose map our server's requests already have: they carry the
//! connection's addresses; its guard rides in the response body unboxed, the stack
//! boxes the body once), the consumer filter none. Each figure is the difference between the same requests
//! sent through the filter and straight to the service it wraps, so allocations of the
//! request, the runtime and the service itself cancel out.
//!
//! The service is cloned for every request, as a generated client does (the consumer),
//! and as the provider's server does for a stack that is not ready (rpc-transport's
//! `connection_service.rs`; a ready one it calls in place): the costlier case.

use std::convert::Infallible;

use http::{Request, Response};
use lossless_rpc_filter::graceful::{ConsumerGracefulLayer, ProviderGracefulLayer};
use rpc_lifecycle::{Lifecycle, ShutdownConfig};
use tonic::body::Body;
use tower::service_fn;
use tower_layer::Layer;

mod common;

use common::allocations_per_request;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

#[test]
fn the_filters_add_one_allocation_on_the_provider_and_none_on_the_consumer() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let lifecycle = Lifecycle::new("cost", ShutdownConfig::default());
    // A body with data: tonic's `Body::new` turns an ended body into `Body::empty()`
    // without boxing it (and would drop the guard at once).
    let inner = service_fn(|_request: Request<Body>| async {
        let reply = http_body_util::Full::new(bytes::Bytes::from_static(b"reply"));
        Ok::<_, Infallible>(Response::new(Body::new(reply)))
    });

    let plain = allocations_per_request(&runtime, inner);
    let provider = ProviderGracefulLayer::new(lifecycle.provider_handles()).layer(inner);
    let through_provider = allocations_per_request(&runtime, provider);
    let consumer = ConsumerGracefulLayer::new(lifecycle.consumer_handles()).layer(inner);
    let through_consumer = allocations_per_request(&runtime, consumer);
    println!(
        "heap blocks per request: plain {plain}, provider filter {through_provider}, \
         consumer filter {through_consumer}"
    );
    assert_eq!(through_provider - plain, 1, "provider filter");
    assert_eq!(through_consumer - plain, 0, "consumer filter");
}
