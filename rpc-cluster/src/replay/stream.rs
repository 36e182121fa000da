//! A request body still being written when its call began (a client or bidirectional
//! stream), shared by the call's attempts.
//!
//! The latest attempt reads the caller's body and sends each frame at once; the frames
//! it sent stay in memory (references, not copies) while they fit in
//! `max_replay_stream_bytes`, so that a later attempt can send them again. Which later attempt
//! may have the body is the rule of `replay/mod.rs`: one that nothing was sent for yet,
//! or, once the caller has finished writing, any — the body is then as complete as a
//! unary request's. A body that outgrows `max_replay_stream_bytes` belongs to the
//! attempt that is sending it, and to no other; so does one whose call has ended (was
//! answered: a bidirectional stream's answer comes with its first messages), which
//! then costs no more per frame than the caller's own body.
//!
//! Only the latest attempt may read it: once the call moves on, an older attempt still
//! polled by its connection gets an error instead of a frame, so no frame goes to two
//! instances unless a later attempt sends it again on purpose.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use http::HeaderMap;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tonic::Status;
use tonic::body::Body as TonicBody;

/// What polling a body for its next frame gives.
pub(crate) type Polled = Poll<Option<Result<Frame<Bytes>, Status>>>;

/// The caller's streaming body, what has been read of it, and which attempt may read on.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    /// The data frames read so far, in order: kept for a later attempt while their
    /// total stays within `max_bytes` (read ahead and not sent yet, or sent).
    frames: Vec<Bytes>,
    /// The bytes of all the data frames read so far.
    size: usize,
    /// The largest body kept for another attempt (`max_replay_stream_bytes`).
    max_bytes: usize,
    /// The rest of the caller's body, until it ends or an attempt takes it.
    rest: TonicBody,
    /// `Some` once the caller's body ended: its trailers, if it had any.
    ended: Option<Option<HeaderMap>>,
    /// Whether any attempt sent a frame of it.
    sent: bool,
    /// Whether one attempt took the body for itself (it outgrew `max_bytes` or failed):
    /// no other attempt can have it.
    taken: bool,
    /// The latest attempt's number: only that attempt may read the body.
    latest: u64,
}

/// How far one attempt has read the shared body.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    /// The next kept frame to send.
    next: usize,
    /// Whether the end (trailers or none) was sent.
    finished: bool,
    /// The rest of the body, when this attempt took it for itself.
    own: Option<TonicBody>,
}

impl StreamSlot {
    /// The slot of a body of which `frames` (`size` bytes) were read ahead, and `rest`
    /// follows.
    pub(crate) fn new(frames: Vec<Bytes>, size: usize, max_bytes: usize, rest: TonicBody) -> Self {
        Self {
            frames,
            size,
            max_bytes,
            rest,
            ended: None,
            sent: false,
            taken: false,
            latest: 0,
        }
    }

    /// The number of a new attempt, which from now on is the only one that may read.
    /// `None` when the body cannot be sent again.
    pub(crate) fn next_attempt(&mut self) -> Option<u64> {
        if !self.replayable() {
            return None;
        }
        self.latest += 1;
        Some(self.latest)
    }

    /// Whether another attempt can send the whole body: nothing of it was sent yet, or
    /// all of it is kept. A body that may be complete by now (the caller wrote it ahead
    /// of what was sent) is read as far as it is ready, as a unary request is when its
    /// call begins.
    pub(crate) fn replayable(&mut self) -> bool {
        if self.taken {
            return false;
        }
        !self.sent || self.read_ready_to_end()
    }

    /// Whether the body is complete and kept whole: an attempt sends all of it at once,
    /// and its answer is due soon after.
    pub(crate) fn is_complete(&self) -> bool {
        !self.taken && self.ended.is_some() && self.size <= self.max_bytes
    }

    /// Reads what the caller has ready without waiting, keeping it, until the body ends
    /// (true) or no more is ready or it outgrows `max_bytes` (false).
    fn read_ready_to_end(&mut self) -> bool {
        while self.ended.is_none() && self.size <= self.max_bytes {
            let Some(frame) = self.rest.frame().now_or_never() else {
                return false;
            };
            match frame {
                None => self.ended = Some(None),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.keep(data),
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            self.ended = Some(Some(trailers));
                        }
                    }
                },
                // The caller's body failed: the next attempt sends what was kept, then
                // this error, and no other attempt follows.
                Some(Err(status)) => {
                    self.rest = TonicBody::new(super::ErrorBody(Some(status)));
                    return false;
                }
            }
        }
        self.is_complete()
    }

    fn keep(&mut self, data: Bytes) {
        self.size += data.len();
        self.frames.push(data);
    }

    /// The next frame for attempt `attempt` at `cursor`; `alone` when no one else holds
    /// the body (its call ended): the attempt then takes the rest for itself once it
    /// has sent what was kept.
    pub(crate) fn poll_frame(
        &mut self,
        attempt: u64,
        cursor: &mut Cursor,
        alone: bool,
        cx: &mut Context<'_>,
    ) -> Polled {
        if self.latest != attempt {
            return Poll::Ready(Some(Err(Status::internal(
                "request body belongs to a later attempt",
            ))));
        }
        if self.taken {
            return Poll::Ready(Some(Err(Status::internal("request body already sent"))));
        }
        if let Some(frame) = self.frames.get(cursor.next) {
            cursor.next += 1;
            self.sent = true;
            return Poll::Ready(Some(Ok(Frame::data(frame.clone()))));
        }
        if let Some(trailers) = &self.ended {
            if std::mem::replace(&mut cursor.finished, true) {
                return Poll::Ready(None);
            }
            return Poll::Ready(trailers.clone().map(|t| Ok(Frame::trailers(t))));
        }
        if alone || self.size > self.max_bytes {
            return self.give_rest_to(cursor, cx);
        }
        self.poll_rest(cursor, cx)
    }

    /// Reads the caller's next frame, sends it, and keeps it while the body fits in
    /// `max_bytes`; past that, the body belongs to this attempt alone.
    fn poll_rest(&mut self, cursor: &mut Cursor, cx: &mut Context<'_>) -> Polled {
        loop {
            let frame = std::task::ready!(Pin::new(&mut self.rest).poll_frame(cx));
            let frame = match frame {
                None => {
                    self.ended = Some(None);
                    cursor.finished = true;
                    return Poll::Ready(None);
                }
                Some(Err(status)) => {
                    self.give_up_kept();
                    return Poll::Ready(Some(Err(status)));
                }
                Some(Ok(frame)) => frame,
            };
            match frame.into_data() {
                Ok(data) => {
                    self.sent = true;
                    self.keep(data.clone());
                    if self.size > self.max_bytes {
                        cursor.own = Some(self.take_rest());
                        self.give_up_kept();
                    } else {
                        cursor.next += 1;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        self.ended = Some(Some(trailers.clone()));
                        cursor.finished = true;
                        return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                    }
                    // A frame of a kind this crate does not know: not sent on.
                }
            }
        }
    }

    /// Every kept frame sent, and past `max_bytes` or alone: this attempt takes the
    /// rest.
    fn give_rest_to(&mut self, cursor: &mut Cursor, cx: &mut Context<'_>) -> Polled {
        let mut rest = self.take_rest();
        self.give_up_kept();
        let frame = Pin::new(&mut rest).poll_frame(cx);
        cursor.own = Some(rest);
        frame
    }

    fn take_rest(&mut self) -> TonicBody {
        std::mem::replace(&mut self.rest, TonicBody::empty())
    }

    /// No other attempt can have the body: what was kept for one is let go.
    fn give_up_kept(&mut self) {
        self.taken = true;
        self.frames = Vec::new();
    }
}

impl Cursor {
    /// The next frame of the rest this attempt took for itself, if it took it.
    pub(crate) fn poll_own(&mut self, cx: &mut Context<'_>) -> Option<Polled> {
        let own = self.own.as_mut()?;
        Some(Pin::new(own).poll_frame(cx))
    }
}
