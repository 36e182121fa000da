//! The request side: a body that fails with `RESOURCE_EXHAUSTED` at the first message
//! declared over the decoding limit, before any of that message is read.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tonic::Status;

use super::scanner::MessageScanner;
use rpc_core::BoxError;

pin_project! {
    /// A request body checked against `max_decoding_message_size`. Over the limit it
    /// yields a [`Status`] error, which tonic hands to the handler as the request's
    /// status (a unary call is answered with it at once); the rest of the body is never
    /// polled, so the peer's bytes stay in h2's flow-control window, not in our memory.
    pub(crate) struct LimitedRequestBody<B> {
        #[pin]
        inner: B,
        scanner: MessageScanner,
        limit: usize,
        failed: bool,
    }
}

impl<B> LimitedRequestBody<B> {
    pub(crate) fn new(inner: B, limit: usize) -> Self {
        Self {
            inner,
            scanner: MessageScanner::new(limit),
            limit,
            failed: false,
        }
    }
}

/// The status of a message over the decoding limit. The message starts as tonic's own
/// does, so `message_size_status` and a reader who knows tonic recognise it.
fn too_large(length: usize, limit: usize) -> Status {
    Status::resource_exhausted(format!(
        "Error, decoded message length too large: found {length} bytes, the limit is: {limit} bytes"
    ))
}

impl<B> Body for LimitedRequestBody<B>
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
        if *this.failed {
            return Poll::Ready(None);
        }
        let frame = match ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref()
            && let Some(oversized) = this.scanner.scan(data)
        {
            *this.failed = true;
            return Poll::Ready(Some(Err(too_large(oversized.length, *this.limit).into())));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full};
    use tonic::Code;

    use super::*;

    fn framed(length: u32) -> Bytes {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&length.to_be_bytes());
        bytes.extend(std::iter::repeat_n(1, length as usize));
        Bytes::from(bytes)
    }

    #[tokio::test]
    async fn a_message_within_the_limit_passes_unchanged() {
        let body = LimitedRequestBody::new(Full::new(framed(16)), 16);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes, framed(16));
    }

    #[tokio::test]
    async fn a_message_over_the_limit_fails_with_resource_exhausted() {
        let body = LimitedRequestBody::new(Full::new(framed(17)), 16);
        let error = body.collect().await.unwrap_err();
        let status = error.downcast::<Status>().unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(
            status
                .message()
                .contains("found 17 bytes, the limit is: 16 bytes"),
            "{status:?}"
        );
    }
}
