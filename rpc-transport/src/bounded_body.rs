//! A response body cut at a bound, with a gRPC status in its trailers.
//!
//! A gRPC call whose response has begun can still be ended early: by the caller's
//! deadline (on either side: the provider's `call_bounds.rs`, the consumer's whole-call
//! deadline in lossless-rpc-cluster), or by the server's drain bound at shutdown.
//! Ending it with trailers that carry a status, rather than tearing the stream down,
//! lets every gRPC client read what happened. [`BoundedBody`] is that cut, once; what
//! differs is the [`BodyBound`] that says when and with which status.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use rpc_core::metadata::status_trailers;
use tonic::Status;

/// What can end a response body before it ends by itself, and the status it ends it
/// with.
pub trait BodyBound {
    /// Ready with the status to end the body with once the bound has passed; until
    /// then `Pending`, registered to be woken when it passes.
    fn poll_passed(&mut self, cx: &mut Context<'_>) -> Poll<Status>;
}

pin_project! {
    /// A response body that ends with `bound`'s status in its trailers when the bound
    /// passes before the body ended by itself. Dropping the inner body at the cut
    /// resets its stream (and, on a provider, cancels the handler producing it).
    pub struct BoundedBody<B, L> {
        // `None` once cut (or for a response that never had one).
        #[pin]
        inner: Option<B>,
        bound: Option<L>,
    }
}

impl<B, L> BoundedBody<B, L> {
    /// `inner`, cut when `bound` passes (`None`: never cut).
    pub fn new(inner: B, bound: Option<L>) -> Self {
        Self {
            inner: Some(inner),
            bound,
        }
    }

    /// A body that has already ended (a trailers-only response carries its status in
    /// its headers).
    pub fn ended() -> Self {
        Self {
            inner: None,
            bound: None,
        }
    }
}

impl<B: Body, L: BodyBound> Body for BoundedBody<B, L> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(frame) = inner.poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let Some(bound) = this.bound.as_mut() else {
            return Poll::Pending;
        };
        let status = std::task::ready!(bound.poll_passed(cx));
        this.inner.set(None);
        *this.bound = None;
        Poll::Ready(Some(Ok(Frame::trailers(status_trailers(&status)))))
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

    use bytes::Bytes;
    use futures_util::{StreamExt, stream};
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    /// Passes at the first poll that finds it armed.
    struct Armed(bool);

    impl BodyBound for Armed {
        fn poll_passed(&mut self, _cx: &mut Context<'_>) -> Poll<Status> {
            if self.0 {
                Poll::Ready(Status::unavailable("cut"))
            } else {
                Poll::Pending
            }
        }
    }

    fn one_message_then_silence() -> impl Body<Data = Bytes, Error = Infallible> {
        let frames = stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"m")))])
            .chain(stream::pending());
        StreamBody::new(frames)
    }

    #[tokio::test]
    async fn frames_pass_until_the_bound_then_its_status_ends_the_body() {
        let mut body = Box::pin(BoundedBody::new(
            one_message_then_silence(),
            Some(Armed(true)),
        ));
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "m");
        let trailers = body
            .frame()
            .await
            .unwrap()
            .unwrap()
            .into_trailers()
            .unwrap();
        assert_eq!(trailers.get("grpc-status").unwrap(), "14");
        assert!(body.frame().await.is_none());
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn an_ended_body_has_no_frame() {
        type Silent = StreamBody<stream::Empty<Result<Frame<Bytes>, Infallible>>>;
        let mut body = Box::pin(BoundedBody::<Silent, Armed>::ended());
        let frame = body.frame().await;
        assert!(frame.is_none());
    }
}
