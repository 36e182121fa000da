//! The request body of one call, kept so the call can be sent again.
//!
//! When a call begins, what its caller has ready is read at once: all of a unary
//! request (and of any request complete by then, a server stream's), which is kept, up
//! to `max_replay_bytes`, and sent again whole to each attempt. A body still being
//! written (a client or bidirectional stream) is read ahead only a little
//! ([`READ_AHEAD_BYTES`]; all that is ready, up to `max_replay_bytes`, for calls sent
//! to several instances at once, which each need the whole body): its frames go out as
//! the caller writes them, and those sent are kept too, up to `max_replay_stream_bytes`
//! (`stream.rs`). Another attempt may have it
//! only if the whole of it can be sent again — nothing of it left this process yet, or
//! the caller has finished it and all of it is kept — which is the rule "a stream is
//! re-sent elsewhere only if nothing of it was sent, unless it is complete and
//! buffered like a unary request". A stream a closing provider refused at once, before
//! the caller's first message, goes to another instance like a unary call; one it
//! refused after the caller finished a stream that is kept whole does too; one refused
//! halfway through a stream still being written, or past what is kept of it, never
//! does. An attempt only *polling*
//! the body (HTTP/2 clients poll right after the headers) takes nothing, and once the
//! call moves on to a new attempt, the older ones can no longer read it.
//!
//! Keeping a stream costs more than keeping a unary request: the encoder cannot reuse
//! the buffer of a message that is kept, so each kept message is memory new to the
//! process. Reading a ready stream ahead whole, up to 4 MiB, before sending any of it
//! (what this crate did before) ran a client stream of 100 messages of 64 KiB at
//! 0.88–0.93× plain tonic's rate; sending as it comes while keeping 4 MiB, at 0.90×;
//! keeping 256 KiB, at 0.98–0.99× (`docs/benchmarks.md`, "Streams").

mod stream;

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

use stream::{Cursor, StreamSlot};

/// Tells when an attempt's request body has ended (its caller finished writing it):
/// `true` from then on. An attempt whose body was complete when it began has none.
pub(crate) type RequestEnd = tokio::sync::watch::Receiver<bool>;

/// How much of a body that has not ended is read when its call begins, in bytes, before
/// its frames are sent as they come: 64 KiB, so a stream of small messages that is
/// ready whole is kept as a unary request is, and a larger one starts to leave at once.
/// One more frame past it is looked at, which ends a unary request of any size.
pub(crate) const READ_AHEAD_BYTES: usize = 64 * 1024;

/// The captured request body of one call.
#[derive(Debug)]
pub(crate) enum RequestBody {
    /// Complete: every attempt gets a copy.
    Buffered {
        data: Frames,
        trailers: Option<HeaderMap>,
    },
    /// Still being written: sent as it comes, kept while it fits (`stream.rs`).
    Streaming(Arc<Mutex<StreamSlot>>),
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

/// A body being read into memory: its chunks so far and their size.
#[derive(Default)]
struct Read {
    data: Chunks,
    size: usize,
}

/// What reading one more frame of a body when its call begins decided.
enum Captured {
    /// The body ended: every attempt gets it whole.
    Whole(RequestBody),
    /// The frame was read; more may follow.
    More,
    /// The body failed: the first attempt sends what was read, then the error.
    Failed(Status),
}

impl Read {
    /// Takes the next `frame` of a body.
    fn take(&mut self, frame: Option<Result<Frame<Bytes>, Status>>) -> Captured {
        let frame = match frame {
            None => return Captured::Whole(self.whole(None)),
            Some(Err(status)) => return Captured::Failed(status),
            Some(Ok(frame)) => frame,
        };
        match frame.into_data() {
            Ok(chunk) => {
                self.size += chunk.len();
                self.data.push(chunk);
                Captured::More
            }
            Err(frame) => match frame.into_trailers() {
                Ok(trailers) => Captured::Whole(self.whole(Some(trailers))),
                // A frame of a kind this crate does not know: not sent on.
                Err(_unknown) => Captured::More,
            },
        }
    }

    fn whole(&mut self, trailers: Option<HeaderMap>) -> RequestBody {
        RequestBody::Buffered {
            data: Frames::from_chunks(std::mem::take(&mut self.data)),
            trailers,
        }
    }

    /// The body as a stream: what was read, then `rest`.
    fn streaming(self, max_bytes: usize, rest: TonicBody) -> RequestBody {
        let slot = StreamSlot::new(self.data.into_vec(), self.size, max_bytes, rest);
        RequestBody::Streaming(Arc::new(Mutex::new(slot)))
    }
}

impl RequestBody {
    /// Reads what `body` has ready without waiting: all of a unary call's, at most
    /// [`READ_AHEAD_BYTES`] and one frame more of a body that has not ended, and never
    /// past `max_bytes`; a body that has not ended is then kept as it is sent up to
    /// `max_stream_bytes` (at most `max_bytes`).
    #[cfg(test)]
    pub(crate) fn capture(body: TonicBody, max_bytes: usize, max_stream_bytes: usize) -> Self {
        Self::capture_reading_ahead(body, max_bytes, max_stream_bytes, READ_AHEAD_BYTES)
    }

    /// As `capture`, reading up to `read_ahead` bytes (and one frame more) of a body
    /// that has not ended: calls sent to several instances at once (forking, broadcast)
    /// read all that is ready, up to `max_bytes`, so that each gets the whole body.
    pub(crate) fn capture_reading_ahead(
        mut body: TonicBody,
        max_bytes: usize,
        max_stream_bytes: usize,
        read_ahead: usize,
    ) -> Self {
        let read_ahead = read_ahead.min(max_bytes);
        let max_stream_bytes = max_stream_bytes.min(max_bytes);
        let mut read = Read::default();
        let mut past_read_ahead = false;
        loop {
            // Not finished yet: send what we have, then the rest as it comes.
            let Some(frame) = body.frame().now_or_never() else {
                return read.streaming(max_stream_bytes, body);
            };
            match read.take(frame) {
                Captured::Whole(whole) => return whole,
                Captured::Failed(status) => {
                    return read
                        .streaming(max_stream_bytes, TonicBody::new(ErrorBody(Some(status))));
                }
                Captured::More if read.size > max_bytes || past_read_ahead => {
                    return read.streaming(max_stream_bytes, body);
                }
                Captured::More => past_read_ahead = read.size > read_ahead,
            }
        }
    }

    /// Whether another attempt can send the whole body (always when buffered; when
    /// streaming, see `stream.rs`).
    pub(crate) fn replayable(&self) -> bool {
        match self {
            Self::Buffered { .. } => true,
            Self::Streaming(slot) => slot.lock().replayable(),
        }
    }

    /// Whether the body is complete and kept: an attempt sends it whole at once, so its
    /// answer is due soon after (a unary request, a server stream's, a client stream
    /// its caller has finished).
    pub(crate) fn is_complete(&self) -> bool {
        match self {
            Self::Buffered { .. } => true,
            Self::Streaming(slot) => slot.lock().is_complete(),
        }
    }

    /// The body of one attempt, and for a body still being written, when it ends.
    /// `None` when it cannot be sent whole again.
    pub(crate) fn attempt(&self) -> Option<(TonicBody, Option<RequestEnd>)> {
        let mut end = None;
        let source = match self {
            Self::Buffered { data, trailers } => Source::Buffered {
                data: data.clone(),
                next: 0,
                trailers: trailers.clone(),
            },
            Self::Streaming(slot) => {
                // From now on the earlier attempts can no longer read the body.
                let attempt = slot.lock().next_attempt()?;
                let (ended, receiver) = tokio::sync::watch::channel(false);
                end = Some(receiver);
                Source::Shared {
                    slot: slot.clone(),
                    attempt,
                    cursor: Cursor::default(),
                    ended,
                }
            }
        };
        Some((TonicBody::new(AttemptBody { source }), end))
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
        /// This attempt's number: only the latest may read.
        attempt: u64,
        cursor: Cursor,
        /// Set once the body has ended (the attempt's wait for its answer counts from
        /// then).
        ended: tokio::sync::watch::Sender<bool>,
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
                cursor,
                ended,
            } => {
                // The body outgrew what is kept, or its call has ended, and this attempt
                // took it: no lock.
                let frame = match cursor.poll_own(cx) {
                    Some(frame) => frame,
                    None => {
                        // Only this attempt holds the body: its call was answered (or
                        // gave up), so no other attempt will ever want what is kept.
                        let alone = Arc::strong_count(slot) == 1;
                        slot.lock().poll_frame(*attempt, cursor, alone, cx)
                    }
                };
                if is_end(&frame) {
                    ended.send_replace(true);
                }
                frame
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

/// Whether `frame` ends a body: its end, or its trailers.
fn is_end(frame: &Poll<Option<Result<Frame<Bytes>, Status>>>) -> bool {
    match frame {
        Poll::Ready(None) => true,
        Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
        _ => false,
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
mod tests;
