//! The request body of one call, kept so the call can be sent again.
//!
//! A unary request (and any request whose body is complete when the call starts) is
//! buffered up to `max_replay_bytes` and replayed to each attempt. A body still
//! streaming is sent once: it belongs to the first attempt that takes a frame from it.
//! Until then nothing of it left this process, so a later attempt may have it — which
//! is exactly the rule "a stream is re-sent elsewhere only if nothing of it was sent":
//! a stream a closing provider refused at once, before the caller's first message,
//! goes to another instance like a unary call; one that sent a message never does.
//! An attempt only *polling* the body (HTTP/2 clients poll right after the headers)
//! takes nothing, and once the call moves on to a new attempt, the older ones can no
//! longer take it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use http::HeaderMap;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use smallvec::SmallVec;
use tonic::Status;
use tonic::body::Body as TonicBody;

/// The captured request body of one call.
#[derive(Debug)]
pub(crate) enum RequestBody {
    /// Complete: every attempt gets a copy.
    Buffered {
        data: Frames,
        trailers: Option<HeaderMap>,
    },
    /// Still streaming: the first attempt to take a frame from it owns it.
    Streaming(Arc<Mutex<StreamSlot>>),
}

/// A streaming body not sent yet, and which attempt may send it.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    /// `None` once an attempt took it.
    body: Option<Prefixed>,
    /// The latest attempt's number: only that attempt may take the body.
    latest: u64,
}

/// Chunks read while capturing; a unary request's single chunk stays inline.
type Chunks = SmallVec<[Bytes; 1]>;

/// The data frames of a complete body. A unary request is one frame: kept without a
/// collection, so buffering it costs no allocation.
#[derive(Clone, Debug, Default)]
pub(crate) enum Frames {
    #[default]
    Empty,
    One(Bytes),
    Many(Arc<[Bytes]>),
}

impl Frames {
    fn from_chunks(mut data: Chunks) -> Self {
        match data.len() {
            0 => Self::Empty,
            1 => Self::One(data.pop().expect("one frame")),
            _ => Self::Many(data.into_vec().into()),
        }
    }

    fn get(&self, index: usize) -> Option<&Bytes> {
        match self {
            Self::Empty => None,
            Self::One(chunk) => (index == 0).then_some(chunk),
            Self::Many(chunks) => chunks.get(index),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Empty => 0,
            Self::One(_) => 1,
            Self::Many(chunks) => chunks.len(),
        }
    }
}

/// Frames already read, followed by the rest of the original body.
#[derive(Debug)]
pub(crate) struct Prefixed {
    prefix: VecDeque<Frame<Bytes>>,
    rest: TonicBody,
}

/// A body being read into memory: its chunks so far and their size.
#[derive(Default)]
struct Read {
    data: Chunks,
    size: usize,
}

impl Read {
    /// Takes the next `frame` of `rest`: the captured body once it is decided (complete,
    /// over `max_bytes`, or failed), `None` while more may follow.
    fn take(
        &mut self,
        frame: Option<Result<Frame<Bytes>, Status>>,
        max_bytes: usize,
        rest: &mut TonicBody,
    ) -> Option<RequestBody> {
        let data = std::mem::take(&mut self.data);
        match frame {
            None => Some(RequestBody::Buffered {
                data: Frames::from_chunks(data),
                trailers: None,
            }),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(chunk) => {
                    self.size += chunk.len();
                    let mut data = data;
                    data.push(chunk);
                    if self.size > max_bytes {
                        let rest = std::mem::replace(rest, TonicBody::empty());
                        return Some(RequestBody::streaming(data, rest));
                    }
                    self.data = data;
                    None
                }
                Err(frame) => match frame.into_trailers() {
                    Ok(trailers) => Some(RequestBody::Buffered {
                        data: Frames::from_chunks(data),
                        trailers: Some(trailers),
                    }),
                    Err(_unknown) => {
                        self.data = data;
                        None
                    }
                },
            },
            // An error: send what we have, then the error.
            Some(Err(status)) => Some(RequestBody::streaming(
                data,
                TonicBody::new(ErrorBody(Some(status))),
            )),
        }
    }
}

impl RequestBody {
    /// Reads what `body` has ready without waiting: all of it for a unary call.
    pub(crate) fn capture(mut body: TonicBody, max_bytes: usize) -> Self {
        let mut read = Read::default();
        loop {
            // Not finished yet: send what we have, then the rest.
            let Some(frame) = body.frame().now_or_never() else {
                return Self::streaming(read.data, body);
            };
            if let Some(whole) = read.take(frame, max_bytes, &mut body) {
                return whole;
            }
        }
    }

    fn streaming(data: Chunks, rest: TonicBody) -> Self {
        Self::Streaming(Arc::new(Mutex::new(StreamSlot {
            body: Some(Prefixed {
                prefix: data.into_iter().map(Frame::data).collect(),
                rest,
            }),
            latest: 0,
        })))
    }

    /// Whether another attempt can be sent (always when buffered; when streaming, only
    /// while no attempt has taken a frame of the body).
    pub(crate) fn replayable(&self) -> bool {
        match self {
            Self::Buffered { .. } => true,
            Self::Streaming(slot) => slot.lock().body.is_some(),
        }
    }

    /// Whether the body was complete when the call began (a unary request's, a
    /// server stream's): its answer is due soon after it is sent.
    pub(crate) fn is_complete(&self) -> bool {
        matches!(self, Self::Buffered { .. })
    }

    /// The body of one attempt. `None` when a streaming body was already consumed.
    pub(crate) fn attempt(&self) -> Option<TonicBody> {
        let source = match self {
            Self::Buffered { data, trailers } => Source::Buffered {
                data: data.clone(),
                next: 0,
                trailers: trailers.clone(),
            },
            Self::Streaming(slot) => {
                let mut shared = slot.lock();
                shared.body.as_ref()?;
                // From now on the earlier attempts can no longer take the body.
                shared.latest += 1;
                Source::Shared {
                    slot: slot.clone(),
                    attempt: shared.latest,
                    taken: None,
                }
            }
        };
        Some(TonicBody::new(AttemptBody { source }))
    }
}

enum Source {
    Buffered {
        data: Frames,
        next: usize,
        trailers: Option<HeaderMap>,
    },
    Shared {
        slot: Arc<Mutex<StreamSlot>>,
        /// This attempt's number (see [`StreamSlot::latest`]).
        attempt: u64,
        taken: Option<Prefixed>,
    },
}

struct AttemptBody {
    source: Source,
}

impl Body for AttemptBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match &mut self.source {
            Source::Buffered {
                data,
                next,
                trailers,
            } => {
                if let Some(chunk) = data.get(*next) {
                    *next += 1;
                    return Poll::Ready(Some(Ok(Frame::data(chunk.clone()))));
                }
                Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))))
            }
            Source::Shared {
                slot,
                attempt,
                taken,
            } => {
                if let Some(prefixed) = taken.as_mut() {
                    return prefixed.poll_next(cx);
                }
                let mut shared = slot.lock();
                if shared.latest != *attempt {
                    return Poll::Ready(Some(Err(Status::internal(
                        "request body belongs to a later attempt",
                    ))));
                }
                let Some(prefixed) = shared.body.as_mut() else {
                    return Poll::Ready(Some(Err(Status::internal("request body already sent"))));
                };
                // Nothing ready to send: the body stays shared, as nothing of it left.
                let frame = std::task::ready!(prefixed.poll_next(cx));
                *taken = shared.body.take();
                Poll::Ready(frame)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Buffered {
                data,
                next,
                trailers,
            } => *next >= data.len() && trailers.is_none(),
            Source::Shared { .. } => false,
        }
    }

    // No exact size hint: gRPC does not use content-length (tonic's own request bodies
    // give none either).
}

impl Prefixed {
    /// The next frame: the captured ones first, then the rest of the caller's body.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(frame) = self.prefix.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }
}

/// A body that fails with the error its source failed with.
struct ErrorBody(Option<Status>);

impl Body for ErrorBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;
    use http_body_util::{BodyExt, StreamBody};

    async fn collect(body: TonicBody) -> Vec<u8> {
        body.collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn a_complete_body_is_replayed_to_every_attempt() {
        let body = RequestBody::capture(
            TonicBody::new(http_body_util::Full::new(Bytes::from("abc"))),
            1024,
        );
        assert!(body.replayable());
        for _ in 0..3 {
            let attempt = body.attempt().unwrap();
            assert_eq!(collect(attempt).await, b"abc");
        }
    }

    #[tokio::test]
    async fn a_streaming_body_goes_once_and_only_if_untouched() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Status>>(4);
        let stream = tokio_stream_from(rx);
        tx.send(Ok(Frame::data(Bytes::from("a")))).await.unwrap();
        let body = RequestBody::capture(TonicBody::new(StreamBody::new(stream)), 1024);
        assert!(body.replayable());
        let first = body.attempt().unwrap();
        drop(first);
        assert!(body.replayable(), "untouched: another attempt may have it");
        let second = body.attempt().unwrap();
        tx.send(Ok(Frame::data(Bytes::from("b")))).await.unwrap();
        drop(tx);
        assert_eq!(collect(second).await, b"ab");
        assert!(!body.replayable());
        assert!(body.attempt().is_none());
    }

    #[tokio::test]
    async fn a_stream_polled_with_nothing_to_send_can_still_go_elsewhere_but_not_twice() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Status>>(4);
        let body =
            RequestBody::capture(TonicBody::new(StreamBody::new(tokio_stream_from(rx))), 1024);
        let mut first = body.attempt().unwrap();
        // Polled right after the headers, as HTTP/2 clients do: nothing to send yet.
        assert!(futures_util::poll!(first.frame()).is_pending());
        assert!(
            body.replayable(),
            "nothing of it left: another attempt may have it"
        );
        // The call moves on (the first attempt was refused); the first attempt, still
        // alive in its connection task, can no longer take the message that comes now.
        let second = body.attempt().unwrap();
        tx.send(Ok(Frame::data(Bytes::from("m")))).await.unwrap();
        let stale = first.frame().await.unwrap();
        assert!(stale.is_err(), "the older attempt is fenced off");
        drop(tx);
        assert_eq!(collect(second).await, b"m");
        assert!(!body.replayable(), "sent: never replayed");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_not_buffered() {
        let frames =
            stream::iter((0..4).map(|_| Ok::<_, Status>(Frame::data(Bytes::from(vec![0u8; 10])))));
        let body = RequestBody::capture(TonicBody::new(StreamBody::new(frames)), 15);
        assert!(matches!(body, RequestBody::Streaming(_)));
        let attempt = body.attempt().unwrap();
        assert_eq!(collect(attempt).await.len(), 40, "nothing lost");
    }

    fn tokio_stream_from<T: Send + 'static>(
        mut rx: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures_util::Stream<Item = T> + Send + 'static {
        stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
