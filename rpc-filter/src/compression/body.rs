//! A body whose messages pass through a [`Transcoder`], frame by frame.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use rpc_core::BoxError;

use super::framing::{Direction, Transcoder};

pin_project! {
    /// `inner` with its messages compressed or decompressed ([`Direction`]); trailers
    /// pass unchanged. A transform that fails (a bomb, bytes that do not decompress, a
    /// body cut inside a message) yields its `tonic::Status` as the body's error, which
    /// tonic hands on as the call's status, and then the body ends without reading
    /// more of `inner`.
    pub(crate) struct TranscodeBody<B> {
        #[pin]
        inner: B,
        transcoder: Transcoder,
        failed: bool,
    }
}

impl<B> TranscodeBody<B> {
    pub(crate) fn new(inner: B, direction: Direction) -> Self {
        Self {
            inner,
            transcoder: Transcoder::new(direction),
            failed: false,
        }
    }
}

impl<B> Body for TranscodeBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        loop {
            let frame = match ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => frame,
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None if this.transcoder.between_messages() => return Poll::Ready(None),
                None => {
                    *this.failed = true;
                    return Poll::Ready(Some(Err(Transcoder::cut_short().into())));
                }
            };
            let data = match frame.into_data() {
                Ok(data) => data,
                Err(frame) => {
                    if frame.is_trailers() && !this.transcoder.between_messages() {
                        *this.failed = true;
                        return Poll::Ready(Some(Err(Transcoder::cut_short().into())));
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
            };
            match this.transcoder.push(data) {
                Ok(Some(out)) => return Poll::Ready(Some(Ok(Frame::data(out)))),
                // Only part of a message so far: read on.
                Ok(None) => {}
                Err(status) => {
                    *this.failed = true;
                    return Poll::Ready(Some(Err(status.into())));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || (self.inner.is_end_stream() && self.transcoder.between_messages())
    }

    fn size_hint(&self) -> SizeHint {
        // The transform changes the size: no hint (an exact one would become a wrong
        // content-length).
        SizeHint::default()
    }
}
