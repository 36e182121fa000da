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

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use rpc_core::BoxError;
use rpc_core::metadata::{deadline_exceeded, status_trailers};
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
                Ok(response.map(|body| TonicBody::new(DeadlineBody::new(body, deadline, limit))))
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(Box::new(deadline_exceeded(limit)) as BoxError),
        }
    })
}

/// A response body that ends with `DEADLINE_EXCEEDED` trailers when the deadline
/// passes before it ended by itself.
struct DeadlineBody {
    /// `None` once the deadline cut it (dropping it resets the stream).
    inner: Option<TonicBody>,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
}

impl DeadlineBody {
    fn new(inner: TonicBody, deadline: Instant, limit: Duration) -> Self {
        Self {
            inner: Some(inner),
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            limit,
        }
    }
}

impl Body for DeadlineBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(frame) = Pin::new(inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        this.inner = None;
        let trailers = status_trailers(&deadline_exceeded(this.limit));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::{StreamExt, stream};
    use http_body_util::{BodyExt, StreamBody};

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
