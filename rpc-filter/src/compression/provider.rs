//! The provider side: compressed requests read for the generated server, responses
//! compressed as the service's configuration says.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use rpc_core::Compression;
use tonic::Status;
use tonic::body::Body as TonicBody;
use tower_layer::Layer;
use tower_service::Service;

use super::CompressionLimits;
use super::body::TranscodeBody;
use super::encoding::{
    Encoding, GRPC_ACCEPT_ENCODING, GRPC_ENCODING, PROVIDER_ACCEPTS, Sent, accepts,
};
use super::framing::Direction;
use super::request_encoding::RequestEncoding;

/// The longest piece of an unsupported `grpc-encoding` repeated in the refusal.
const MAX_NAME_ECHOED: usize = 64;

/// Applies [`ProviderCompression`] to a provider's routes.
#[derive(Clone, Debug)]
pub struct ProviderCompressionLayer {
    settings: Arc<Settings>,
}

#[derive(Debug)]
struct Settings {
    /// The compression of each service's responses, by gRPC service name; services
    /// not in it answer uncompressed.
    responses: HashMap<String, Encoding>,
    limits: CompressionLimits,
}

impl ProviderCompressionLayer {
    /// A layer compressing the responses of each service in `services` (gRPC service
    /// name → compression, e.g. from `provider.services.<name>.compression`), within
    /// `limits`.
    pub fn new(
        services: impl IntoIterator<Item = (String, Compression)>,
        limits: CompressionLimits,
    ) -> Self {
        let responses = services
            .into_iter()
            .filter_map(|(name, compression)| Some((name, Encoding::configured(compression)?)))
            .collect();
        Self {
            settings: Arc::new(Settings { responses, limits }),
        }
    }
}

impl<S> Layer<S> for ProviderCompressionLayer {
    type Service = ProviderCompression<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ProviderCompression {
            inner,
            settings: self.settings.clone(),
        }
    }
}

/// The provider's compression filter, around tonic's routes (whose generated servers
/// were not told to compress: the application built them, and configuration cannot
/// reach them).
///
/// - A request whose `grpc-encoding` is `gzip` or `zstd` has each compressed message
///   decompressed (within `limits.max_decoding_message_size`: more is
///   `RESOURCE_EXHAUSTED`; bytes that do not decompress are `INTERNAL`) and its flag
///   cleared, and the header removed, so the generated server reads plain messages. The
///   request carries a [`RequestEncoding`] saying what arrived.
/// - Any other `grpc-encoding` but `identity` is refused at once, trailers-only, with
///   `UNIMPLEMENTED` and the `grpc-accept-encoding` this filter reads (gRPC's
///   compression spec).
/// - A response of a service configured `gzip` or `zstd`, to a request whose
///   `grpc-accept-encoding` lists that encoding, has each message of at most
///   `limits.max_encoding_message_size` compressed, its flag set and `grpc-encoding`
///   sent; a response the generated server compressed itself is left as it is.
/// - A response to a request that speaks compression (it carries `grpc-encoding` or
///   `grpc-accept-encoding`) advertises `grpc-accept-encoding: gzip,zstd,identity`, as
///   does the `UNIMPLEMENTED` refusal. A request with neither comes from a client that
///   neither compresses nor reads compressed messages (gRPC's own clients send
///   `grpc-accept-encoding` on every call); telling it would cost each of its responses
///   one more header to encode and parse, and gRPC's compression guide lets a peer not
///   disclose its encodings.
#[derive(Clone, Debug)]
pub struct ProviderCompression<S> {
    inner: S,
    settings: Arc<Settings>,
}

impl<S> ProviderCompression<S> {
    /// The encoding the response to a request with these `path` and `headers` gets.
    fn response_encoding(&self, path: &str, headers: &HeaderMap) -> Option<Encoding> {
        if self.settings.responses.is_empty() {
            return None;
        }
        let (service, _) = crate::split_path(path)?;
        let encoding = *self.settings.responses.get(service)?;
        accepts(headers, encoding).then_some(encoding)
    }
}

impl<S> Service<Request<TonicBody>> for ProviderCompression<S>
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
        let respond = self.response_encoding(request.uri().path(), request.headers());
        let advertise = speaks_compression(request.headers());
        match Sent::of(request.headers()) {
            Sent::Identity => {}
            Sent::Known(encoding) => {
                request.headers_mut().remove(GRPC_ENCODING);
                let arrived = RequestEncoding::new(encoding);
                request.extensions_mut().insert(arrived.clone());
                let direction = Direction::Decompress {
                    encoding,
                    max_decoded: self.settings.limits.max_decoding_message_size,
                    record: Some(arrived),
                };
                request = request.map(|body| TonicBody::new(TranscodeBody::new(body, direction)));
            }
            Sent::Unsupported(name) => {
                return ResponseFuture::Refused {
                    response: Some(unsupported(&name)),
                };
            }
        }
        ResponseFuture::Called {
            inner: self.inner.call(request),
            respond,
            advertise,
            max_buffered: self.settings.limits.max_encoding_message_size,
        }
    }
}

/// Whether a request with these `headers` comes from a client that speaks compression:
/// it names its messages' encoding or the encodings it reads. One pass over the
/// entries (a request holds a handful) rather than two hashed lookups.
fn speaks_compression(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|name| name == GRPC_ACCEPT_ENCODING || name == GRPC_ENCODING)
}

/// The trailers-only answer to a request in an encoding this filter does not read.
fn unsupported(name: &str) -> Response<TonicBody> {
    let name: String = name.chars().take(MAX_NAME_ECHOED).collect();
    let status = Status::unimplemented(format!(
        "grpc-encoding `{name}` is not supported: this provider reads gzip, zstd and identity"
    ));
    let mut response = status.into_http::<TonicBody>();
    response
        .headers_mut()
        .insert(GRPC_ACCEPT_ENCODING, PROVIDER_ACCEPTS);
    response
}

pin_project! {
    /// The response of a [`ProviderCompression`] call.
    #[project = Projection]
    pub enum ResponseFuture<F> {
        /// Passed to the routes; the response is compressed with `respond`, if any.
        Called {
            #[pin]
            inner: F,
            respond: Option<Encoding>,
            // The request speaks compression: the response says what this filter reads.
            advertise: bool,
            max_buffered: usize,
        },
        /// Refused before the routes: an unsupported encoding.
        Refused { response: Option<Response<TonicBody>> },
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<TonicBody>, E>>,
{
    type Output = Result<Response<TonicBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Called {
                inner,
                respond,
                advertise,
                max_buffered,
            } => {
                let mut response = ready!(inner.poll(cx))?;
                let headers = response.headers_mut();
                if *advertise {
                    headers.insert(GRPC_ACCEPT_ENCODING, PROVIDER_ACCEPTS);
                }
                // Not a trailers-only answer (it has no messages), and not one the
                // generated server compressed itself.
                let compress = respond.filter(|_| {
                    !headers.contains_key("grpc-status") && !headers.contains_key(GRPC_ENCODING)
                });
                let Some(encoding) = compress else {
                    return Poll::Ready(Ok(response));
                };
                encoding.mark(headers);
                let direction = Direction::Compress {
                    encoding,
                    max_buffered: *max_buffered,
                };
                Poll::Ready(Ok(
                    response.map(|body| TonicBody::new(TranscodeBody::new(body, direction)))
                ))
            }
            Projection::Refused { response } => Poll::Ready(Ok(response
                .take()
                .unwrap_or_else(|| Status::internal("polled after completion").into_http()))),
        }
    }
}
