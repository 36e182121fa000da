//! The response side: a body that ends with `RESOURCE_EXHAUSTED` in its trailers instead
//! of sending a message over the encoding limit.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Status;

use super::scanner::MessageScanner;
use rpc_core::BoxError;

pin_project! {
    /// A response body checked against `max_encoding_message_size`. The messages before
    /// the first one over the limit are sent; that one is not, and the call ends there
    /// with `RESOURCE_EXHAUSTED` in its trailers (the handler's stream is dropped).
    /// tonic writes a message's prefix and its bytes in one chunk, so the cut falls on
    /// a message boundary and the peer reads whole messages, then the status.
    pub(crate) struct LimitedResponseBody<B> {
        #[pin]
        inner: B,
        scanner: MessageScanner,
        limit: usize,
        state: State,
    }
}

#[derive(Debug)]
enum State {
    Streaming,
    /// The accepted part of the last chunk went out; these trailers are next.
    Trailers(Option<HeaderMap>),
    Ended,
}

impl<B> LimitedResponseBody<B> {
    pub(crate) fn new(inner: B, limit: usize) -> Self {
        Self {
            inner,
            scanner: MessageScanner::new(limit),
            limit,
            state: State::Streaming,
        }
    }
}

/// The trailers of a call whose response message was over the encoding limit, with a
/// message that starts as tonic's own does.
fn too_large(length: usize, limit: usize) -> HeaderMap {
    let status = Status::resource_exhausted(format!(
        "Error, encoded message length too large: found {length} bytes, the limit is: {limit} bytes"
    ));
    let mut trailers = HeaderMap::new();
    // The message is ASCII we wrote: encoding it cannot fail. Should it, the code alone
    // still says what happened.
    if status.add_header(&mut trailers).is_err() {
        trailers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    trailers
}

impl<B> Body for LimitedResponseBody<B>
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
        let this = self.project();
        match this.state {
            State::Streaming => {}
            State::Trailers(trailers) => {
                let trailers = trailers.take().unwrap_or_default();
                *this.state = State::Ended;
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            State::Ended => return Poll::Ready(None),
        }
        let frame = match ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
            None => return Poll::Ready(None),
        };
        let Some(oversized) = frame.data_ref().and_then(|data| this.scanner.scan(data)) else {
            return Poll::Ready(Some(Ok(frame)));
        };
        let trailers = too_large(oversized.length, *this.limit);
        if oversized.at == 0 {
            *this.state = State::Ended;
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        *this.state = State::Trailers(Some(trailers));
        let accepted = frame
            .into_data()
            .map(|data| data.slice(..oversized.at))
            .unwrap_or_default();
        Poll::Ready(Some(Ok(Frame::data(accepted))))
    }

    fn is_end_stream(&self) -> bool {
        match self.state {
            State::Streaming => self.inner.is_end_stream(),
            State::Trailers(_) => false,
            State::Ended => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Streaming => self.inner.size_hint(),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};
    use tonic::Code;

    use super::*;

    fn framed(length: u32) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&length.to_be_bytes());
        bytes.extend(std::iter::repeat_n(1, length as usize));
        bytes
    }

    fn body(
        chunks: Vec<Vec<u8>>,
    ) -> LimitedResponseBody<impl Body<Data = Bytes, Error = BoxError>> {
        let frames = chunks
            .into_iter()
            .map(|chunk| Ok::<_, BoxError>(Frame::data(Bytes::from(chunk))));
        LimitedResponseBody::new(StreamBody::new(futures_util::stream::iter(frames)), 16)
    }

    #[tokio::test]
    async fn messages_within_the_limit_pass_unchanged() {
        let collected = body(vec![framed(3), framed(16)]).collect().await.unwrap();
        assert!(collected.trailers().is_none());
        assert_eq!(collected.to_bytes(), [framed(3), framed(16)].concat());
    }

    #[tokio::test]
    async fn the_messages_before_one_over_the_limit_go_out_then_the_status() {
        let chunks = vec![[framed(3), framed(17), framed(1)].concat(), framed(2)];
        let collected = body(chunks).collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap();
        let status = Status::from_header_map(&trailers).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("found 17 bytes"), "{status:?}");
        assert_eq!(collected.to_bytes(), framed(3));
    }

    #[tokio::test]
    async fn a_first_message_over_the_limit_sends_only_the_status() {
        let collected = body(vec![framed(20)]).collect().await.unwrap();
        assert!(collected.trailers().is_some());
        assert!(collected.to_bytes().is_empty());
    }
}
