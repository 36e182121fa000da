//! A tower layer of an application's own on both sides of a call: the provider checks a
//! bearer token and answers `UNAUTHENTICATED` without running the handler; the consumer
//! adds the token to every call. `ApplicationBuilder::provider_layer` puts the first
//! where it sees only admitted calls; the second simply wraps the reference's channel.
//!
//! ```no_run
//! use lossless_rpc::tower::Layer;
//! # async fn demo(
//! #     mut provider: lossless_rpc::ApplicationBuilder,
//! #     mut consumer: lossless_rpc::ApplicationBuilder,
//! # ) {
//! use rpc_examples::bearer_auth::{AddBearer, RequireBearer};
//! provider.provider_layer(RequireBearer::new("s3cret"));
//! let channel = AddBearer::new("s3cret").layer(consumer.reference("helloworld.Greeter"));
//! // let client = GreeterClient::new(channel);
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use lossless_rpc::http::header::AUTHORIZATION;
use lossless_rpc::http::{HeaderValue, Request, Response};
use lossless_rpc::tonic::body::Body as TonicBody;
use lossless_rpc::tower::{Layer, Service};

/// The provider side: calls without `authorization: Bearer <token>` are answered
/// `UNAUTHENTICATED` and never reach the handler. The health service is not exempt:
/// probes that need it go to the admin endpoint, or carry the token.
#[derive(Clone, Debug)]
pub struct RequireBearer {
    expected: Arc<HeaderValue>,
}

impl RequireBearer {
    /// Requires `token`.
    ///
    /// # Panics
    /// When `token` cannot be a header value (a control character).
    pub fn new(token: &str) -> Self {
        let expected =
            HeaderValue::try_from(format!("Bearer {token}")).expect("a token is a header value");
        Self {
            expected: Arc::new(expected),
        }
    }
}

impl<S> Layer<S> for RequireBearer {
    type Service = RequireBearerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireBearerService {
            inner,
            expected: self.expected.clone(),
        }
    }
}

/// The service [`RequireBearer`] wraps a provider's routes in.
#[derive(Clone, Debug)]
pub struct RequireBearerService<S> {
    inner: S,
    expected: Arc<HeaderValue>,
}

impl<S> Service<Request<TonicBody>> for RequireBearerService<S>
where
    S: Service<Request<TonicBody>, Response = Response<TonicBody>>,
    S::Error: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<TonicBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<TonicBody>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<TonicBody>) -> Self::Future {
        let presented = request.headers().get(AUTHORIZATION);
        if presented != Some(&*self.expected) {
            let refused =
                lossless_rpc::tonic::Status::unauthenticated("a valid bearer token is required");
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        }
        Box::pin(self.inner.call(request))
    }
}

/// The consumer side: adds `authorization: Bearer <token>` to every call.
#[derive(Clone, Debug)]
pub struct AddBearer {
    value: HeaderValue,
}

impl AddBearer {
    /// Sends `token`.
    ///
    /// # Panics
    /// When `token` cannot be a header value.
    pub fn new(token: &str) -> Self {
        Self {
            value: HeaderValue::try_from(format!("Bearer {token}"))
                .expect("a token is a header value"),
        }
    }
}

impl<S> Layer<S> for AddBearer {
    type Service = AddBearerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AddBearerService {
            inner,
            value: self.value.clone(),
        }
    }
}

/// The channel [`AddBearer`] wraps a reference in; a generated client takes it.
#[derive(Clone, Debug)]
pub struct AddBearerService<S> {
    inner: S,
    value: HeaderValue,
}

impl<S, B> Service<Request<B>> for AddBearerService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        request
            .headers_mut()
            .insert(AUTHORIZATION, self.value.clone());
        self.inner.call(request)
    }
}
