//! Cluster strategies: what to do when an attempt fails (Dubbo's `cluster`).
//!
//! Every strategy re-routes a request a closing provider refused ("closing, not
//! executed"): that happens inside [`CallContext::send`](crate::call::CallContext), so a
//! caller never sees a rolling deploy, whatever strategy it chose.

mod available;
mod broadcast;
mod failback;
mod failfast;
mod failover;
mod failsafe;
mod forking;

use futures_util::future::BoxFuture;
use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

pub(crate) use failback::FailbackQueue;

use crate::call::CallContext;
use crate::config::ClusterKind;

/// Runs `call` under the strategy `kind`. Each strategy's future is boxed on its own,
/// so a call allocates the size of its strategy, not of the largest one.
pub(crate) fn run(
    kind: ClusterKind,
    call: CallContext,
) -> BoxFuture<'static, Result<Response<TonicBody>, BoxError>> {
    match kind {
        ClusterKind::Failover => Box::pin(failover::run(call)),
        ClusterKind::Failfast => Box::pin(failfast::run(call)),
        ClusterKind::Failsafe => Box::pin(failsafe::run(call)),
        ClusterKind::Failback => Box::pin(failback::run(call)),
        ClusterKind::Forking => Box::pin(forking::run(call)),
        ClusterKind::Broadcast => Box::pin(broadcast::run(call)),
        ClusterKind::Available => Box::pin(available::run(call)),
    }
}

/// A successful gRPC response carrying one empty message (every field at its default)
/// and status OK: what failsafe and failback give the caller instead of an error.
pub(crate) fn empty_response() -> Response<TonicBody> {
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::StreamBody;

    // One length-prefixed message frame: not compressed, length 0.
    let message = Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]));
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames = futures_util::stream::iter([
        Ok::<_, std::convert::Infallible>(message),
        Ok(Frame::trailers(trailers)),
    ]);
    let mut response = Response::new(TonicBody::new(StreamBody::new(frames)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
