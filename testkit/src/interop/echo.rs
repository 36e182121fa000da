//! Echo Metadata: the request's `x-grpc-test-echo-initial` goes back in the response
//! headers, its `x-grpc-test-echo-trailing-bin` in the trailers.
//!
//! Done on the HTTP response rather than in the handler because tonic lets a handler set
//! headers but not trailers of a successful call.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// Request metadata echoed in the initial metadata (headers) of the response.
pub const ECHO_INITIAL: &str = "x-grpc-test-echo-initial";

/// Request metadata echoed in the trailing metadata (trailers) of the response.
pub const ECHO_TRAILING: &str = "x-grpc-test-echo-trailing-bin";

/// What a request asked to have echoed.
#[derive(Clone, Debug, Default)]
pub struct Echo {
    initial: Option<HeaderValue>,
    trailing: Option<HeaderValue>,
}

impl Echo {
    /// The echo metadata of a request with `headers`.
    pub fn from_request(headers: &HeaderMap) -> Self {
        Self {
            initial: headers.get(ECHO_INITIAL).cloned(),
            trailing: headers.get(ECHO_TRAILING).cloned(),
        }
    }

    /// `response` with the echoes added: the initial one to its headers, the trailing
    /// one to its trailers — or to its headers too when it is trailers-only (an error
    /// status and no message: its headers are its trailers).
    pub fn apply<B>(self, response: http::Response<B>) -> http::Response<EchoBody<B>> {
        let (mut parts, body) = response.into_parts();
        if let Some(initial) = self.initial {
            parts
                .headers
                .insert(HeaderName::from_static(ECHO_INITIAL), initial);
        }
        let trailing = match self.trailing {
            Some(trailing) if parts.headers.contains_key("grpc-status") => {
                parts
                    .headers
                    .insert(HeaderName::from_static(ECHO_TRAILING), trailing);
                None
            }
            trailing => trailing,
        };
        http::Response::from_parts(
            parts,
            EchoBody {
                inner: body,
                trailing,
            },
        )
    }
}

pin_project! {
    /// A response body that adds the trailing echo to its trailers.
    pub struct EchoBody<B> {
        #[pin]
        inner: B,
        trailing: Option<HeaderValue>,
    }
}

impl<B: Body<Data = Bytes>> Body for EchoBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let poll = this.inner.poll_frame(cx);
        let Poll::Ready(Some(Ok(frame))) = poll else {
            return poll;
        };
        let frame = match (frame.into_trailers(), this.trailing.take()) {
            (Ok(mut trailers), Some(trailing)) => {
                trailers.insert(HeaderName::from_static(ECHO_TRAILING), trailing);
                Frame::trailers(trailers)
            }
            (Ok(trailers), None) => Frame::trailers(trailers),
            (Err(frame), trailing) => {
                *this.trailing = trailing;
                frame
            }
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
