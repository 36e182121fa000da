//! The one way a provider refuses a request without running it: a trailers-only gRPC
//! response marked `rpc-not-executed: <reason>`, sent once the request has arrived.
//!
//! Two filters refuse: the graceful filter from shutdown step 3 on ("closing"), and the
//! concurrency limit under overload ("overloaded"). Both refuse the same way, for the
//! same reason: a response that ends the stream while the client is still sending
//! makes HTTP/2 reset the stream, and a burst of refusals would then reach h2's limit of
//! locally reset streams and close the whole connection (GOAWAY `ENHANCE_YOUR_CALM`),
//! failing every call on it — at shutdown that would be every call still draining on the
//! connection. So the request body (a unary message, usually right behind its headers)
//! is read to its end first, up to [`DRAIN_LIMIT`] bytes and [`DRAIN_WAIT`].
//!
//! rpc consumers read the mark and send the request elsewhere. A plain gRPC client sees
//! the status: `UNAVAILABLE` for a closing refusal (which the transport turns into
//! `REFUSED_STREAM` for such a client: lossless-rpc-transport's `peer.rs`),
//! `RESOURCE_EXHAUSTED` for an overload, so that it backs off rather than retries at
//! once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Buf;
use http::Response;
use http_body::Body;
use pin_project_lite::pin_project;
use rpc_core::metadata::{
    CLOSING, CLOSING_VALUE, ClosingRefusal, NOT_EXECUTED, NOT_EXECUTED_CLOSING,
    NOT_EXECUTED_OVERLOADED,
};
use tonic::body::Body as TonicBody;

/// Most request bytes read (and dropped) before a refusal is sent; a larger request is
/// refused without waiting for the rest.
pub const DRAIN_LIMIT: usize = 64 * 1024;

/// Longest a refusal waits for the rest of its request: a unary message follows its
/// headers at once, but a streaming client may send nothing until it hears back.
pub const DRAIN_WAIT: Duration = Duration::from_millis(20);

/// Why a request was not executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotExecuted {
    /// The provider is shutting down (step 3 on).
    Closing,
    /// The provider's concurrency limit is reached.
    Overloaded,
}

impl NotExecuted {
    /// The refusal's response: a trailers-only gRPC response with the status for the
    /// reason and `rpc-not-executed: <reason>` (a closing refusal also carries
    /// `rpc-closing: 1`).
    pub fn response(self) -> Response<TonicBody> {
        let status = match self {
            Self::Closing => {
                tonic::Status::unavailable("provider is shutting down; request not executed")
            }
            Self::Overloaded => tonic::Status::resource_exhausted(
                "provider overloaded (concurrency limit reached); request not executed",
            ),
        };
        let mut response = status.into_http::<TonicBody>();
        let headers = response.headers_mut();
        match self {
            Self::Closing => {
                headers.insert(NOT_EXECUTED, NOT_EXECUTED_CLOSING);
                headers.insert(CLOSING, CLOSING_VALUE);
                response.extensions_mut().insert(ClosingRefusal);
            }
            Self::Overloaded => {
                headers.insert(NOT_EXECUTED, NOT_EXECUTED_OVERLOADED);
            }
        }
        response
    }

    /// Refuses the request whose body is `body`: reads it (bounded, see the module
    /// documentation), then answers with [`NotExecuted::response`].
    pub fn refuse<B: Body>(self, body: B) -> RefusalFuture<B> {
        RefusalFuture {
            body,
            read: 0,
            wait: tokio::time::sleep(DRAIN_WAIT),
            response: Some(self.response()),
        }
    }
}

pin_project! {
    /// A refusal under way: the request body is read, then the refusal is the answer.
    /// (Not to be confused with `rpc_lifecycle::Refusal`, why an upgrade was not started.)
    pub struct RefusalFuture<B> {
        #[pin]
        body: B,
        read: usize,
        #[pin]
        wait: tokio::time::Sleep,
        response: Option<Response<TonicBody>>,
    }
}

impl<B: Body> Future for RefusalFuture<B> {
    type Output = Response<TonicBody>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        while *this.read <= DRAIN_LIMIT && !this.body.is_end_stream() {
            match this.body.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    *this.read += frame.data_ref().map_or(0, |data| data.remaining());
                }
                Poll::Ready(Some(Err(_)) | None) => break,
                Poll::Pending if this.wait.is_elapsed() => break,
                Poll::Pending => {
                    std::task::ready!(this.wait.as_mut().poll(cx));
                    break;
                }
            }
        }
        Poll::Ready(
            this.response
                .take()
                .unwrap_or_else(|| tonic::Status::internal("polled after completion").into_http()),
        )
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures_util::{StreamExt, stream};
    use http_body::Frame;
    use http_body_util::StreamBody;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_request_is_read_first_and_a_silent_one_waits_at_most_the_drain_wait() {
        let sent = stream::iter([Ok::<_, std::convert::Infallible>(Frame::data(
            Bytes::from_static(b"message"),
        ))]);
        let response = NotExecuted::Closing.refuse(StreamBody::new(sent)).await;
        assert_eq!(response.headers().get(NOT_EXECUTED).unwrap(), "closing");
        assert_eq!(response.headers().get("grpc-status").unwrap(), "14");

        let started = tokio::time::Instant::now();
        let silent = stream::pending::<Result<Frame<Bytes>, std::convert::Infallible>>();
        let response = NotExecuted::Overloaded
            .refuse(StreamBody::new(silent.boxed()))
            .await;
        assert_eq!(response.headers().get(NOT_EXECUTED).unwrap(), "overloaded");
        assert_eq!(response.headers().get("grpc-status").unwrap(), "8");
        assert_eq!(started.elapsed(), DRAIN_WAIT);
    }
}
