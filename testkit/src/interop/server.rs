//! The interop server: [`InteropService`] as an `rpc` provider, with what the test
//! descriptions ask of a server around the handlers (Echo Metadata, gzip both ways, the
//! compressed flag of each request message, read off the body unless rpc's compression
//! filter decompressed the request and recorded it).

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use proto::interop::test_service_server::TestServiceServer;
use rpc::ApplicationBuilder;
use rpc::filter::compression::RequestEncoding;
use tonic::body::Body as TonicBody;
use tonic::codec::CompressionEncoding;
use tonic::server::NamedService;
use tower::Service;

use super::echo::Echo;
use super::message_flags::{FlagsBody, MessageFlags};
use super::service::InteropService;

/// Adds the interop `TestService` to `builder`'s providers and returns the service
/// (its call counts). gzip is accepted and, when the client accepts it, sent.
pub fn provide(builder: &mut ApplicationBuilder) -> InteropService {
    let service = InteropService::new();
    builder.service(InteropServer::new(service.clone()));
    service
}

/// `TestServiceServer` with Echo Metadata around it and the compressed flag of every
/// request message recorded for the handlers (read with [`RequestFlags`](super::message_flags::RequestFlags)).
#[derive(Clone, Debug)]
pub struct InteropServer {
    inner: TestServiceServer<InteropService>,
}

impl InteropServer {
    /// The server of `service`.
    pub fn new(service: InteropService) -> Self {
        Self {
            inner: TestServiceServer::new(service)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip),
        }
    }
}

impl NamedService for InteropServer {
    const NAME: &'static str = <TestServiceServer<InteropService> as NamedService>::NAME;
}

impl Service<http::Request<TonicBody>> for InteropServer {
    type Response = http::Response<TonicBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<TonicBody>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<http::Request<TonicBody>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<TonicBody>) -> Self::Future {
        let echo = Echo::from_request(request.headers());
        let (mut parts, body) = request.into_parts();
        let body = if parts.extensions.get::<RequestEncoding>().is_some() {
            // Decompressed by rpc's filter, which recorded the flags as they arrived.
            body
        } else {
            let flags = MessageFlags::new();
            parts.extensions.insert(flags.clone());
            TonicBody::new(FlagsBody::new(body, flags))
        };
        let request = http::Request::from_parts(parts, body);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(echo.apply(response).map(TonicBody::new))
        })
    }
}
