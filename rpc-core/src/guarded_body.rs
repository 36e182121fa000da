//! A response body that holds a guard until the body ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::InflightGuard;

pin_project! {
    /// Wraps a response body and holds `guard` until the last frame (for gRPC, the
    /// trailers) has been read, an error ends the body, or the body is dropped
    /// (cancellation). Used to count a request as in flight until its response
    /// *ends*, not until its headers are sent: a stream counts until its last message.
    pub struct GuardedBody<B, G = InflightGuard> {
        #[pin]
        inner: B,
        guard: Option<G>,
    }
}

impl<B, G> GuardedBody<B, G> {
    /// `inner`, with `guard` held until it ends.
    pub fn new(inner: B, guard: G) -> Self {
        Self {
            inner,
            guard: Some(guard),
        }
    }

    /// `inner` with no guard (a response that was never counted, e.g. a refusal).
    pub fn unguarded(inner: B) -> Self {
        Self { inner, guard: None }
    }
}

impl<B: Body, G> Body for GuardedBody<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let poll = this.inner.poll_frame(cx);
        let ended = match &poll {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => true,
            Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
            Poll::Pending => false,
        };
        if ended {
            this.guard.take();
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
