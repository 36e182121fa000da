//! A response's body as it arrives on its HTTP/2 stream.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use h2::RecvStream;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;

use super::link::StreamPermit;

/// The body of a response from an instance: its DATA frames, then its trailers (where
/// gRPC puts the status).
///
/// Flow control follows the data: each frame's bytes are given back to the peer's
/// window as the frame is handed to the caller (h2's `FlowControl::release_capacity`),
/// so a slow reader holds back at most one stream window (2 MiB), and never the other
/// calls of its connection (the connection's window holds 128 of them). Dropped before
/// its end, the stream is reset (`CANCEL`) and the instance stops working on it.
#[derive(Debug)]
pub struct ResponseBody {
    recv: RecvStream,
    data_done: bool,
    /// Held while a streaming request body is still being sent: dropping this body
    /// tells that sender to stop (and reset the stream).
    _request: Option<oneshot::Sender<()>>,
    /// The stream's permit: returned when the body ends or is dropped.
    permit: Option<StreamPermit>,
}

impl ResponseBody {
    pub(super) fn new(
        recv: RecvStream,
        request: Option<oneshot::Sender<()>>,
        permit: StreamPermit,
    ) -> Self {
        Self {
            recv,
            data_done: false,
            _request: request,
            permit: Some(permit),
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Errors only when the stream is gone, and then there is nothing to
                    // give back.
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => this.data_done = true,
            }
        }
        let trailers = ready!(this.recv.poll_trailers(cx));
        // The stream has ended: its permit goes back for the next call.
        this.permit = None;
        match trailers {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(error) => Poll::Ready(Some(Err(error))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
