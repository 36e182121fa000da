//! The response body of a watched call.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Code;

use super::{OnCallEnd, code_in_headers};

pin_project! {
    /// Wraps a response body and tells its [`OnCallEnd`] when the call ends: at the
    /// trailers (with their status), at an error, at an end without trailers
    /// (`UNKNOWN`), or when dropped before its end (`CANCELLED`).
    pub struct CallEndBody<B, E: OnCallEnd> {
        #[pin]
        inner: B,
        end: Option<E>,
    }

    impl<B, E: OnCallEnd> PinnedDrop for CallEndBody<B, E> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(end) = this.project().end.take() {
                end.call_ended(Code::Cancelled);
            }
        }
    }
}

impl<B, E: OnCallEnd> CallEndBody<B, E> {
    /// `inner`, whose end `end` is told of (`None`: the call has ended already, or
    /// nobody needs to know).
    pub fn new(inner: B, end: Option<E>) -> Self {
        Self { inner, end }
    }
}

impl<B: Body, E: OnCallEnd> Body for CallEndBody<B, E> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let Some(end) = this.end else {
            return this.inner.poll_frame(cx);
        };
        let poll = end.in_scope(|| this.inner.poll_frame(cx));
        let code = match &poll {
            Poll::Pending => return poll,
            Poll::Ready(Some(Ok(frame))) => match frame.trailers_ref() {
                Some(trailers) => code_in_headers(trailers).unwrap_or(Code::Unknown),
                None => return poll,
            },
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => Code::Unknown,
        };
        if let Some(end) = this.end.take() {
            end.call_ended(code);
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

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use record::Ended;

    use super::*;

    /// Notes the code it was told, in a slot the test reads.
    mod record {
        use std::sync::{Arc, Mutex};

        use super::super::OnCallEnd;

        #[derive(Clone, Default)]
        pub(super) struct Ended(pub(super) Arc<Mutex<Vec<tonic::Code>>>);

        impl OnCallEnd for Ended {
            fn call_ended(self, code: tonic::Code) {
                self.0.lock().unwrap().push(code);
            }
        }
    }

    fn frames(
        frames: Vec<Frame<Bytes>>,
    ) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        http_body_util::StreamBody::new(futures_util::stream::iter(
            frames.into_iter().map(Ok::<_, std::convert::Infallible>),
        ))
    }

    fn trailers(code: &'static str) -> Frame<Bytes> {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", code.parse().unwrap());
        Frame::trailers(trailers)
    }

    #[tokio::test]
    async fn the_call_ends_once_at_its_trailers_with_their_code() {
        let ended = Ended::default();
        let body = CallEndBody::new(
            frames(vec![Frame::data(Bytes::from_static(b"m")), trailers("5")]),
            Some(ended.clone()),
        );
        let mut body = Box::pin(body);
        body.frame().await.unwrap().unwrap();
        assert!(
            ended.0.lock().unwrap().is_empty(),
            "a message is not the end"
        );
        body.frame().await.unwrap().unwrap();
        assert_eq!(*ended.0.lock().unwrap(), [Code::NotFound]);
        assert!(body.frame().await.is_none());
        drop(body);
        assert_eq!(ended.0.lock().unwrap().len(), 1, "told once");
    }

    #[tokio::test]
    async fn a_body_dropped_early_is_cancelled_and_one_without_trailers_unknown() {
        let ended = Ended::default();
        let body = CallEndBody::new(
            frames(vec![Frame::data(Bytes::from_static(b"m"))]),
            Some(ended.clone()),
        );
        drop(body);
        let body = CallEndBody::new(
            frames(vec![Frame::data(Bytes::from_static(b"m"))]),
            Some(ended.clone()),
        );
        body.collect().await.unwrap();
        assert_eq!(*ended.0.lock().unwrap(), [Code::Cancelled, Code::Unknown]);
    }
}
