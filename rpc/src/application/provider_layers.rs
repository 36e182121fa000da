//! The application's own tower layers around the provided services
//! ([`ApplicationBuilder::provider_layer`](super::ApplicationBuilder::provider_layer)):
//! each boxed into the one service type the routes are wrapped in, with an error it
//! returns answered as that error's gRPC status rather than resetting the stream.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;
use tower::Service;
use tower::util::BoxCloneSyncService;
use tower_layer::Layer;

/// The service an application's own provider layers wrap and return: a provided
/// service's calls, as tonic's routes take them (`http::Request<tonic::body::Body>`),
/// answered with an `http::Response<tonic::body::Body>` (a refusal is a response with a
/// gRPC status, e.g. `tonic::Status::unauthenticated(..).into_http()`).
pub type ProviderService = BoxCloneSyncService<Request<TonicBody>, Response<TonicBody>, Infallible>;

/// One provider layer, boxed: applied to the routes at start-up.
pub(super) type ProviderLayerFn = Box<dyn Fn(ProviderService) -> ProviderService + Send + Sync>;

/// `layer`, as a function from the inner service to the wrapped one.
pub(super) fn boxed<L>(layer: L) -> ProviderLayerFn
where
    L: Layer<ProviderService> + Send + Sync + 'static,
    L::Service:
        Service<Request<TonicBody>, Response = Response<TonicBody>> + Clone + Send + Sync + 'static,
    <L::Service as Service<Request<TonicBody>>>::Error: Into<BoxError>,
    <L::Service as Service<Request<TonicBody>>>::Future: Send + 'static,
{
    Box::new(move |inner| BoxCloneSyncService::new(Answered::new(layer.layer(inner))))
}

/// A layer's service whose errors become gRPC status responses: one from `poll_ready`
/// answers the next call.
#[derive(Clone)]
struct Answered<S> {
    inner: S,
    /// The status of a failed `poll_ready`, for the call that follows it.
    not_ready: Option<tonic::Status>,
}

impl<S> Answered<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            not_ready: None,
        }
    }
}

impl<S> Service<Request<TonicBody>> for Answered<S>
where
    S: Service<Request<TonicBody>, Response = Response<TonicBody>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<TonicBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<TonicBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.not_ready.is_some() {
            return Poll::Ready(Ok(()));
        }
        match self.inner.poll_ready(cx) {
            Poll::Ready(Err(error)) => {
                self.not_ready = Some(tonic::Status::from_error(error.into()));
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, request: Request<TonicBody>) -> Self::Future {
        if let Some(status) = self.not_ready.take() {
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        let call = self.inner.call(request);
        Box::pin(async move {
            Ok(call
                .await
                .unwrap_or_else(|error| tonic::Status::from_error(error.into()).into_http()))
        })
    }
}
