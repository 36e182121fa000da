//! The consumer side: requests compressed as the reference's configuration says,
//! compressed responses read for the generated client.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use rpc_core::Compression;
use tonic::body::Body as TonicBody;
use tower_layer::Layer;
use tower_service::Service;

use super::CompressionLimits;
use super::body::TranscodeBody;
use super::encoding::{CONSUMER_ACCEPTS, Encoding, GRPC_ACCEPT_ENCODING, GRPC_ENCODING, Sent};
use super::framing::Direction;

/// Applies [`ConsumerCompression`] to a reference's channel.
#[derive(Clone, Copy, Debug)]
pub struct ConsumerCompressionLayer {
    encoding: Option<Encoding>,
    limits: CompressionLimits,
}

impl ConsumerCompressionLayer {
    /// A layer compressing requests with `compression` (from
    /// `consumer.references.<name>.compression`) and reading compressed responses,
    /// within `limits`.
    pub fn new(compression: Compression, limits: CompressionLimits) -> Self {
        Self {
            encoding: Encoding::configured(compression),
            limits,
        }
    }
}

impl<S> Layer<S> for ConsumerCompressionLayer {
    type Service = ConsumerCompression<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConsumerCompression {
            inner,
            encoding: self.encoding,
            limits: self.limits,
        }
    }
}

/// The consumer's compression filter, in front of the cluster (so a retry replays the
/// bytes compressed once, and each attempt sends them as they are).
///
/// - Each request message of at most `limits.max_encoding_message_size` is compressed
///   with the configured encoding, its flag set and `grpc-encoding` sent — unless the
///   generated client compresses itself (`send_compressed`: the request already has a
///   `grpc-encoding`).
/// - Unless the generated client reads compressed responses itself (`accept_compressed`:
///   the request already has a `grpc-accept-encoding`), the request advertises
///   `grpc-accept-encoding: gzip,zstd`, and a response in either has each compressed
///   message decompressed (within `limits.max_decoding_message_size`: more is
///   `RESOURCE_EXHAUSTED`; bytes that do not decompress are `INTERNAL`), its flag
///   cleared and `grpc-encoding` removed before the generated client's decoder sees it.
#[derive(Clone, Debug)]
pub struct ConsumerCompression<S> {
    inner: S,
    encoding: Option<Encoding>,
    limits: CompressionLimits,
}

impl<S> Service<Request<TonicBody>> for ConsumerCompression<S>
where
    S: Service<Request<TonicBody>, Response = Response<TonicBody>>,
{
    type Response = Response<TonicBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<TonicBody>) -> Self::Future {
        let headers = request.headers_mut();
        let compress = self
            .encoding
            .filter(|_| !headers.contains_key(GRPC_ENCODING));
        let decode = !headers.contains_key(GRPC_ACCEPT_ENCODING);
        if decode {
            headers.insert(GRPC_ACCEPT_ENCODING, CONSUMER_ACCEPTS);
        }
        if let Some(encoding) = compress {
            encoding.mark(headers);
            let direction = Direction::Compress {
                encoding,
                max_buffered: self.limits.max_encoding_message_size,
            };
            request = request.map(|body| TonicBody::new(TranscodeBody::new(body, direction)));
        }
        ResponseFuture {
            inner: self.inner.call(request),
            max_decoded: decode.then_some(self.limits.max_decoding_message_size),
        }
    }
}

pin_project! {
    /// The response of a [`ConsumerCompression`] call.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        // The decoding limit when this filter reads compressed responses.
        max_decoded: Option<usize>,
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<TonicBody>, E>>,
{
    type Output = Result<Response<TonicBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = ready!(this.inner.poll(cx))?;
        let Some(max_decoded) = *this.max_decoded else {
            return Poll::Ready(Ok(response));
        };
        let Sent::Known(encoding) = Sent::of(response.headers()) else {
            // Plain, or an encoding we did not advertise: the generated client decides.
            return Poll::Ready(Ok(response));
        };
        response.headers_mut().remove(GRPC_ENCODING);
        let direction = Direction::Decompress {
            encoding,
            max_decoded,
            record: None,
        };
        Poll::Ready(Ok(
            response.map(|body| TonicBody::new(TranscodeBody::new(body, direction)))
        ))
    }
}
