//! The caller's deadline over the whole call, response body included.
//!
//! A gRPC deadline (`grpc-timeout`, set by the caller) bounds a call from its start to
//! its last message, whatever its kind (gRPC, "Deadlines"). Each attempt is bounded
//! until its response headers already (`timeout`, lowered by `grpc-timeout`); this bounds
//! what that does not: attempts and backoffs together, and everything after the
//! headers — for a stream, every later message. A provider that answers the headers
//! and then never sends another message (the interop case `timeout_on_sleeping_server`)
//! would otherwise hold the caller forever.
//!
//! When the deadline passes first, the caller gets `DEADLINE_EXCEEDED` — as an error
//! before the headers, or as the trailers of the stream after them — and the response
//! body is dropped, which resets the HTTP/2 stream so the provider stops working on it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use http::Response;
use rpc_core::BoxError;
use rpc_core::metadata::deadline_exceeded;
use rpc_transport::{BodyBound, BoundedBody};
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::body::Body as TonicBody;

/// `call`, bounded by `limit` from now (the moment the caller made the call).
pub(crate) fn bound(
    call: BoxFuture<'static, Result<Response<TonicBody>, BoxError>>,
    limit: Duration,
) -> BoxFuture<'static, Result<Response<TonicBody>, BoxError>> {
    let deadline = Instant::now() + limit;
    Box::pin(async move {
        match tokio::time::timeout_at(deadline, call).await {
            Ok(Ok(response)) => {
                let bound = CallDeadline {
                    sleep: Box::pin(tokio::time::sleep_until(deadline)),
                    limit,
                };
                Ok(response.map(|body| TonicBody::new(BoundedBody::new(body, Some(bound)))))
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(Box::new(deadline_exceeded(limit)) as BoxError),
        }
    })
}

/// The caller's deadline, as a bound on the response body: `DEADLINE_EXCEEDED` when it
/// passes.
struct CallDeadline {
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
}

impl BodyBound for CallDeadline {
    fn poll_passed(&mut self, cx: &mut Context<'_>) -> Poll<Status> {
        std::task::ready!(self.sleep.as_mut().poll(cx));
        Poll::Ready(deadline_exceeded(self.limit))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::{StreamExt, stream};
    use http_body_util::{BodyExt, StreamBody};

    use bytes::Bytes;
    use http_body::Frame;

    use super::*;

    fn pending_after_one_message() -> TonicBody {
        let frames = stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"m")))])
            .chain(stream::pending());
        TonicBody::new(StreamBody::new(frames))
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_goes_quiet_ends_with_deadline_exceeded_at_the_deadline() {
        let call: BoxFuture<'static, Result<Response<TonicBody>, BoxError>> =
            Box::pin(async { Ok(Response::new(pending_after_one_message())) });
        let started = Instant::now();
        let response = bound(call, Duration::from_millis(250)).await.unwrap();
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "m");
        let last = body.frame().await.unwrap().unwrap();
        let trailers = last.into_trailers().unwrap();
        assert_eq!(trailers.get("grpc-status").unwrap(), "4");
        assert_eq!(started.elapsed(), Duration::from_millis(250));
        assert!(body.frame().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_without_headers_by_the_deadline_fails_with_deadline_exceeded() {
        let call: BoxFuture<'static, Result<Response<TonicBody>, BoxError>> =
            Box::pin(std::future::pending());
        let error = bound(call, Duration::from_millis(5)).await.unwrap_err();
        let status = error.downcast::<Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    }
}
