//! Sending a request's body on its HTTP/2 stream.
//!
//! A body whose frames are ready when the call starts (a unary request, a replayed
//! buffer) is written at once on the caller's task: one DATA frame that ends the stream,
//! no task. Frames are taken that way only up to [`EAGER_BYTES`]; the rest of a body
//! — one still streaming, or a client stream whose messages are all ready at once — is
//! pumped by a task of its own, which waits for flow-control capacity before it takes
//! each frame from the body (h2's `reserve_capacity` / `poll_capacity`), so a stream
//! larger than the peer's window is held back in the caller's body, not buffered here;
//! it stops when the stream is reset or the response body is dropped.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::{Reason, SendStream};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use rpc_core::BoxError;
use tokio::sync::oneshot;

use crate::woken::PolledWhenWoken;

/// Bytes of a body's ready frames written at once, before the rest waits for
/// flow-control capacity: the send buffer of one stream (1 MiB). The first frame is
/// always written whole (a unary request of up to the message limit). Without this
/// bound, a client stream whose messages were all ready (an iterator of them) was queued
/// in h2 whole: 6.4 MB per call of 100 messages of 64 KiB, at 0.69x tonic's throughput
/// (the `streaming` bench, `STREAMING_SIDE=consumer`).
const EAGER_BYTES: usize = super::options::http2::MAX_SEND_BUFFER;

/// Sends `body` on `stream`; for a body still streaming, the receiver of this returns
/// stops the sending when its sender (kept by the response body) is dropped.
pub(super) fn send<B>(mut body: B, mut stream: SendStream<Bytes>) -> Option<oneshot::Sender<()>>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut written = 0;
    while written < EAGER_BYTES {
        // Polled without a waker: a frame not ready now is left to the pump, which
        // polls again with its own.
        let frame = match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Pending => break,
            Poll::Ready(frame) => frame,
        };
        let end = body.is_end_stream();
        written += data_len(&frame);
        match write(&mut stream, frame, end) {
            Written::More => continue,
            Written::Done => return None,
        }
    }
    let (stop, stopped) = oneshot::channel();
    tokio::spawn(pump(body, stream, stopped));
    Some(stop)
}

/// The bytes of `frame` if it is data.
fn data_len<E>(frame: &Option<Result<Frame<Bytes>, E>>) -> usize {
    match frame {
        Some(Ok(frame)) => frame.data_ref().map_or(0, Bytes::len),
        _ => 0,
    }
}

enum Written {
    More,
    Done,
}

/// Writes one frame of the body (`None`: the body ended). Data is queued by h2, which
/// sends it as the peer's window allows.
fn write(
    stream: &mut SendStream<Bytes>,
    frame: Option<Result<Frame<Bytes>, impl Into<BoxError>>>,
    end: bool,
) -> Written {
    let sent = match frame {
        None => stream.send_data(Bytes::new(), true),
        Some(Ok(frame)) => match frame.into_data() {
            Ok(data) => {
                let sent = stream.send_data(data, end);
                if sent.is_ok() && !end {
                    return Written::More;
                }
                sent
            }
            Err(frame) => match frame.into_trailers() {
                Ok(trailers) => stream.send_trailers(trailers),
                // A frame of a kind HTTP/2 has no place for: skipped.
                Err(_) => return Written::More,
            },
        },
        Some(Err(error)) => {
            let error: BoxError = error.into();
            tracing::debug!(%error, "the request body failed; resetting the stream");
            stream.send_reset(Reason::CANCEL);
            return Written::Done;
        }
    };
    if let Err(error) = sent {
        // The stream was reset or the connection closed: the response says which.
        tracing::debug!(%error, "the request body could not be sent");
    }
    Written::Done
}

/// Takes frames from `body` as the peer's window has room, until the body ends, the
/// stream is reset or `stopped` fires.
async fn pump<B>(mut body: B, mut stream: SendStream<Bytes>, stopped: oneshot::Receiver<()>)
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    // Polled only when it fired, not twice per message (~250 instructions a message,
    // callgrind, a ping-pong stream).
    let stopped = PolledWhenWoken::new(stopped);
    tokio::pin!(stopped);
    loop {
        let frame = tokio::select! {
            biased;
            _ = stopped.as_mut() => {
                stream.send_reset(Reason::CANCEL);
                return;
            }
            room = room(&mut stream) => {
                if !room {
                    return;
                }
                tokio::select! {
                    biased;
                    _ = stopped.as_mut() => {
                        stream.send_reset(Reason::CANCEL);
                        return;
                    }
                    _ = poll_fn(|cx| stream.poll_reset(cx)) => return,
                    frame = body.frame() => frame,
                }
            }
        };
        let end = body.is_end_stream();
        if let Written::Done = write(&mut stream, frame, end) {
            return;
        }
    }
}

/// Waits until the stream may send at least one byte; false when it was reset or can
/// send no more.
async fn room(stream: &mut SendStream<Bytes>) -> bool {
    stream.reserve_capacity(1);
    poll_fn(|cx| {
        loop {
            if stream.capacity() > 0 {
                return Poll::Ready(true);
            }
            if stream.poll_reset(cx).is_ready() {
                return Poll::Ready(false);
            }
            match stream.poll_capacity(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(_) => return Poll::Ready(false),
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests;
