//! Limits on the size of each gRPC message a provider reads and writes
//! (`protocol.max_decoding_message_size`, `protocol.max_encoding_message_size`).
//!
//! tonic puts the same limits on each generated server (`GreeterServer::new(..)
//! .max_decoding_message_size(n)`), but the application builds those servers, so the
//! configuration cannot reach them. This layer applies the configured limits to every
//! service of a listener at once, in front of tonic's routes:
//!
//! - **decoding**: the first request message whose length prefix is over the limit ends
//!   the request with `RESOURCE_EXHAUSTED` before a byte of it is read, as gRPC's status
//!   code list names for "a message larger than the configured limit" (the peer's other
//!   bytes wait in h2's flow-control window, so memory stays bounded);
//! - **encoding**: a response message over the limit is not sent; the call ends with
//!   `RESOURCE_EXHAUSTED` in its trailers.
//!
//! Both default to 4 MiB ([`DEFAULT_MAX_MESSAGE_SIZE`]), gRPC's default receive limit in
//! every implementation: a peer with its defaults refuses anything larger anyway, so
//! failing at the sender names the fault where it lies. A generated server keeps its own
//! decoding limit (tonic's default, also 4 MiB): to accept larger messages, raise the
//! generated server's limit as well.
//!
//! Files: `scanner.rs` reads the length prefixes, `request_body.rs` and
//! `response_body.rs` apply the limit on each side; this file is the tower layer.

mod request_body;
mod response_body;
mod scanner;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tonic::body::Body as TonicBody;
use tower::{Layer, Service};

use request_body::LimitedRequestBody;
use response_body::LimitedResponseBody;
use rpc_core::BoxError;

/// gRPC's default limit on one message, in bytes: 4 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

/// The largest message a provider reads and writes, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageLimits {
    /// Largest request message read; larger ones end the call with
    /// `RESOURCE_EXHAUSTED`. Default [`DEFAULT_MAX_MESSAGE_SIZE`].
    pub max_decoding_message_size: usize,
    /// Largest response message sent; a larger one ends the call with
    /// `RESOURCE_EXHAUSTED` instead. Default [`DEFAULT_MAX_MESSAGE_SIZE`].
    pub max_encoding_message_size: usize,
}

impl Default for MessageLimits {
    fn default() -> Self {
        Self {
            max_decoding_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_encoding_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }
}

/// Applies [`MessageLimits`] to every call of the wrapped service (typically tonic's
/// `Routes`).
#[derive(Clone, Copy, Debug)]
pub struct MessageLimitLayer {
    limits: MessageLimits,
}

impl MessageLimitLayer {
    /// A layer applying `limits`.
    pub fn new(limits: MessageLimits) -> Self {
        Self { limits }
    }
}

impl<S> Layer<S> for MessageLimitLayer {
    type Service = MessageLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MessageLimit {
            inner,
            limits: self.limits,
        }
    }
}

/// The service [`MessageLimitLayer`] makes: the request body and the response body of
/// each call checked against the limits.
#[derive(Clone, Debug)]
pub struct MessageLimit<S> {
    inner: S,
    limits: MessageLimits,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for MessageLimit<S>
where
    S: Service<Request<TonicBody>, Response = Response<ResBody>>,
    ReqBody: http_body::Body<Data = Bytes> + Send + 'static,
    ReqBody::Error: Into<BoxError>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<TonicBody>;
    type Error = S::Error;
    type Future = MessageLimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let limit = self.limits.max_decoding_message_size;
        let request = request.map(|body| TonicBody::new(LimitedRequestBody::new(body, limit)));
        MessageLimitFuture {
            inner: self.inner.call(request),
            limit: self.limits.max_encoding_message_size,
        }
    }
}

pin_project! {
    /// The response of a [`MessageLimit`] call, its body checked against the encoding
    /// limit.
    pub struct MessageLimitFuture<F> {
        #[pin]
        inner: F,
        limit: usize,
    }
}

impl<F, ResBody, E> Future for MessageLimitFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Output = Result<Response<TonicBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let limit = *this.limit;
        let response = ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(
            response.map(|body| TonicBody::new(LimitedResponseBody::new(body, limit)))
        ))
    }
}
