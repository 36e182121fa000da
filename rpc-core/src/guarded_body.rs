//! A response body that holds a guard until the body ends, and tells it how it ended.
//!
//! "Hold something until the response ends" is one job with several holders: an
//! in-flight count that must last until a stream's last message (the graceful filters),
//! a call that must stay counted on its connection until its last frame was handed to
//! HTTP/2 (the transport's per-connection count), a timer or span that records the
//! call's status (the metrics and trace filters), a place under the concurrency limit.
//! [`GuardedBody`] is the one body wrapper for all of them; what differs is the
//! [`BodyGuard`] each holds.

use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::InflightGuard;

/// How a guarded body ended, as its [`BodyGuard`] is told.
#[derive(Clone, Copy, Debug)]
pub enum BodyEnd<'a> {
    /// The trailers arrived (for gRPC, with the call's status).
    Trailers(&'a HeaderMap),
    /// The body ended without trailers.
    NoTrailers,
    /// The body failed.
    Error,
    /// The body was dropped before its end (the caller went away, the stream was reset).
    Dropped,
}

/// What a [`GuardedBody`] holds until its body ends.
pub trait BodyGuard: Sized + Send + 'static {
    /// Told once, when the body ends (or is dropped before its end), how it ended.
    /// Returns `None` (the default) to be dropped now, or itself to be held until the
    /// body is dropped — later than its end: hyper drops a response body once its last
    /// frame was handed to HTTP/2.
    fn body_ended(self, _end: BodyEnd<'_>) -> Option<Self> {
        None
    }

    /// Runs `poll` (one poll of the body) in this guard's context; a trace's guard enters
    /// its span, so what a streaming handler logs while producing its messages belongs
    /// to the call. Default: as is.
    fn in_scope<R>(&self, poll: impl FnOnce() -> R) -> R {
        poll()
    }
}

/// An in-flight count that ends with the body: a request counts until its response
/// *ends*, not until its headers are sent, so a stream counts until its last message.
impl BodyGuard for InflightGuard {}

pin_project! {
    /// Wraps a response body and holds `guard` until the last frame (for gRPC, the
    /// trailers) has been read, an error ends the body, or the body is dropped
    /// (cancellation); the guard is told which ([`BodyGuard::body_ended`]), once.
    pub struct GuardedBody<B, G: BodyGuard = InflightGuard> {
        #[pin]
        inner: B,
        guard: Option<G>,
        // The end was told: a guard still held is kept until the body is dropped.
        told: bool,
    }

    impl<B, G: BodyGuard> PinnedDrop for GuardedBody<B, G> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(guard) = this.guard.take() && !*this.told {
                drop(guard.body_ended(BodyEnd::Dropped));
            }
        }
    }
}

impl<B, G: BodyGuard> GuardedBody<B, G> {
    /// `inner`, with `guard` held until it ends.
    pub fn new(inner: B, guard: G) -> Self {
        Self::with(inner, Some(guard))
    }

    /// `inner`, with `guard` held until it ends if there is one (`None`: nothing to
    /// hold, e.g. a call whose end was already told).
    pub fn with(inner: B, guard: Option<G>) -> Self {
        Self {
            inner,
            guard,
            told: false,
        }
    }

    /// `inner` with no guard (a response that was never counted, e.g. a refusal).
    pub fn unguarded(inner: B) -> Self {
        Self::with(inner, None)
    }
}

impl<B: Body, G: BodyGuard> Body for GuardedBody<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let guard = match this.guard {
            Some(guard) if !*this.told => guard,
            _ => return this.inner.poll_frame(cx),
        };
        let poll = guard.in_scope(|| this.inner.poll_frame(cx));
        let kept = {
            let end = match &poll {
                Poll::Pending => return poll,
                Poll::Ready(Some(Ok(frame))) => match frame.trailers_ref() {
                    Some(trailers) => BodyEnd::Trailers(trailers),
                    None => return poll,
                },
                Poll::Ready(Some(Err(_))) => BodyEnd::Error,
                Poll::Ready(None) => BodyEnd::NoTrailers,
            };
            this.guard.take().and_then(|guard| guard.body_ended(end))
        };
        *this.guard = kept;
        *this.told = true;
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
    use std::sync::Arc;

    use bytes::Bytes;
    use parking_lot::Mutex;

    use super::*;
    use crate::InflightCounter;

    /// Notes how the body ended, and whether it wants to be kept until the drop.
    struct Noting {
        ends: Arc<Mutex<Vec<String>>>,
        keep: bool,
    }

    impl BodyGuard for Noting {
        fn body_ended(self, end: BodyEnd<'_>) -> Option<Self> {
            let name = match end {
                BodyEnd::Trailers(_) => "trailers",
                BodyEnd::NoTrailers => "no-trailers",
                BodyEnd::Error => "error",
                BodyEnd::Dropped => "dropped",
            };
            self.ends.lock().push(name.to_owned());
            self.keep.then_some(self)
        }
    }

    impl Drop for Noting {
        fn drop(&mut self) {
            self.ends.lock().push("released".to_owned());
        }
    }

    fn body(
        frames: Vec<Frame<Bytes>>,
    ) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        http_body_util::StreamBody::new(futures_util::stream::iter(
            frames.into_iter().map(Ok::<_, std::convert::Infallible>),
        ))
    }

    async fn next<B: Body + Unpin>(body: &mut B) -> Option<Frame<B::Data>>
    where
        B::Error: std::fmt::Debug,
    {
        std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx))
            .await
            .map(|frame| frame.unwrap())
    }

    #[tokio::test]
    async fn an_inflight_guard_is_released_at_the_trailers() {
        let counter = InflightCounter::new();
        let mut guarded = Box::pin(GuardedBody::new(
            body(vec![
                Frame::data(Bytes::from_static(b"m")),
                Frame::trailers(HeaderMap::new()),
            ]),
            counter.acquire(),
        ));
        next(&mut guarded).await.unwrap();
        assert_eq!(counter.current(), 1, "a message is not the end");
        next(&mut guarded).await.unwrap();
        assert_eq!(counter.current(), 0);
    }

    #[tokio::test]
    async fn a_guard_is_told_once_and_may_be_kept_until_the_drop() {
        let ends = Arc::new(Mutex::new(Vec::new()));
        let kept = Noting {
            ends: ends.clone(),
            keep: true,
        };
        let mut guarded = Box::pin(GuardedBody::new(
            body(vec![Frame::trailers(HeaderMap::new())]),
            kept,
        ));
        next(&mut guarded).await.unwrap();
        assert!(next(&mut guarded).await.is_none());
        assert_eq!(*ends.lock(), ["trailers"], "told once, still held");
        drop(guarded);
        assert_eq!(*ends.lock(), ["trailers", "released"]);
    }

    #[tokio::test]
    async fn a_body_dropped_early_tells_dropped_and_one_without_trailers_says_so() {
        let ends = Arc::new(Mutex::new(Vec::new()));
        let early = GuardedBody::new(
            body(vec![Frame::data(Bytes::from_static(b"m"))]),
            Noting {
                ends: ends.clone(),
                keep: false,
            },
        );
        drop(early);
        let mut plain = Box::pin(GuardedBody::new(
            body(vec![Frame::data(Bytes::from_static(b"m"))]),
            Noting {
                ends: ends.clone(),
                keep: false,
            },
        ));
        next(&mut plain).await.unwrap();
        assert!(next(&mut plain).await.is_none());
        assert_eq!(
            *ends.lock(),
            ["dropped", "released", "no-trailers", "released"]
        );
    }
}
