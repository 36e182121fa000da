//! The provider filter hands each request a drain notice, and counts the streams that
//! ended as moved.

use std::convert::Infallible;

use http::{HeaderMap, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use rpc_core::DrainNotice;
use rpc_lifecycle::{Lifecycle, ShutdownConfig};
use tonic::body::Body as TonicBody;
use tower::{Layer, ServiceExt, service_fn};

use super::ProviderGracefulLayer;

/// A handler that answers with the moved status when its request's notice has resolved,
/// `grpc-status: 0` otherwise.
async fn handler(request: Request<TonicBody>) -> Result<Response<TonicBody>, Infallible> {
    let notice = request
        .extensions()
        .get::<DrainNotice>()
        .cloned()
        .expect("the filter put a notice in the request");
    let mut trailers = HeaderMap::new();
    if notice.is_draining() {
        let status = rpc_core::moved(Default::default());
        status.add_header(&mut trailers).unwrap();
        trailers.extend(status.metadata().clone().into_headers());
    } else {
        trailers.insert("grpc-status", "0".parse().unwrap());
    }
    let frames = futures_util::stream::iter([Ok::<_, tonic::Status>(Frame::trailers(trailers))]);
    Ok(Response::new(TonicBody::new(StreamBody::new(frames))))
}

async fn call(lifecycle: &Lifecycle) -> HeaderMap {
    let service =
        ProviderGracefulLayer::new(lifecycle.provider_handles()).layer(service_fn(handler));
    let request = Request::builder()
        .uri("/feed.Feed/Subscribe")
        .body(TonicBody::empty())
        .unwrap();
    let response = service.oneshot(request).await.unwrap();
    let collected = response.into_body().collect().await.unwrap();
    collected.trailers().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_request_carries_the_notice_and_a_moved_stream_is_counted() {
    let lifecycle = Lifecycle::new("notice", ShutdownConfig::default());
    let trailers = call(&lifecycle).await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    assert_eq!(lifecycle.streams().moved(), 0);

    lifecycle.streams().tell_all();
    let trailers = call(&lifecycle).await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "14");
    assert_eq!(trailers.get("rpc-stream-moved").unwrap(), "1");
    assert_eq!(lifecycle.streams().moved(), 1);
    assert_eq!(lifecycle.inbound().current(), 0, "the call ended");
}
