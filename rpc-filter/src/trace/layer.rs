//! The call-span filter as a tower layer and service.

use std::task::{Context, Poll};

use http::{Request, Response};
use rpc_core::RpcConventions;
use tower_layer::Layer;
use tower_service::Service;
use tracing::Instrument;
use tracing::instrument::Instrumented;

use super::span::{Side, SpanEnd, call_span};
use crate::call_end::{CallEndBody, CallEndFuture, StatusOfError};

/// Applies [`CallTrace`] to a service on one side of a call.
#[derive(Clone, Copy, Debug)]
pub struct CallTraceLayer {
    side: Option<Side>,
    conventions: RpcConventions,
}

impl CallTraceLayer {
    /// Spans for the calls a provider serves, with the old attribute names
    /// ([`RpcConventions::Old`]; see [`with_conventions`](Self::with_conventions)).
    pub fn server() -> Self {
        Self {
            side: Some(Side::Server),
            conventions: RpcConventions::Old,
        }
    }

    /// Spans for the calls a consumer makes (their attempts are the cluster's spans,
    /// children of these), with the old attribute names.
    pub fn client() -> Self {
        Self {
            side: Some(Side::Client),
            conventions: RpcConventions::Old,
        }
    }

    /// No spans (tracing off): the service only passes calls through.
    pub fn disabled() -> Self {
        Self {
            side: None,
            conventions: RpcConventions::Old,
        }
    }

    /// The same spans with the attribute names `conventions` chooses.
    pub fn with_conventions(self, conventions: RpcConventions) -> Self {
        Self {
            conventions,
            ..self
        }
    }

    /// The side its spans stand for; `None` when disabled.
    pub(crate) fn side(&self) -> Option<Side> {
        self.side
    }

    /// The attribute names of its spans.
    pub(crate) fn conventions(&self) -> RpcConventions {
        self.conventions
    }
}

impl<S> Layer<S> for CallTraceLayer {
    type Service = CallTrace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallTrace {
            inner,
            layer: *self,
        }
    }
}

/// Opens a span for each call, makes it current while the call's future and response
/// body are polled (so what runs below, a handler's logs or the cluster's attempt spans,
/// belongs to it), and records the call's gRPC status when the response body ends.
///
/// The layer for a stack that wants spans alone. The framework's own stacks want both
/// spans and metrics, and take them as one [`CallObserve`](crate::observe::CallObserve)
/// (one future and one body wrapper per call instead of two), built from this layer's
/// settings.
#[derive(Clone, Debug)]
pub struct CallTrace<S> {
    inner: S,
    layer: CallTraceLayer,
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for CallTrace<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Error: StatusOfError,
{
    type Response = Response<CallEndBody<ResponseBody, SpanEnd>>;
    type Error = S::Error;
    type Future = CallEndFuture<Instrumented<S::Future>, SpanEnd>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let Some(side) = self.layer.side else {
            return CallEndFuture::new(
                self.inner.call(request).instrument(tracing::Span::none()),
                None,
            );
        };
        let span = call_span(side, self.layer.conventions, &request);
        let end = SpanEnd::new(&span, side);
        // The inner call is made inside the span too: a service may start work in `call`.
        let inner = span.in_scope(|| self.inner.call(request));
        CallEndFuture::new(inner.instrument(span), end)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::BodyExt;
    use tower::{ServiceExt, service_fn};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::trace::capture::Captured;

    async fn ok(
        _request: Request<()>,
    ) -> Result<Response<http_body_util::Full<Bytes>>, Infallible> {
        tracing::debug!("handler runs");
        let mut response = Response::new(http_body_util::Full::new(Bytes::from_static(b"m")));
        // A trailers-only answer keeps the test short: the status is in the headers.
        response
            .headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("5"));
        Ok(response)
    }

    #[tokio::test]
    async fn a_server_call_gets_a_span_with_its_attributes_and_status() {
        let captured = Captured::default();
        // While a single dispatcher is registered, tracing-core caches a callsite's
        // interest as the first thread to reach it sees it: a parallel test's thread,
        // with no subscriber, would cache "never" and this span would not be made. A
        // second live dispatcher makes every callsite ask both (see rpc-lifecycle's
        // span_tests.rs, where this failed 13 runs in 30).
        let _second_dispatcher =
            tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
        let subscriber = tracing_subscriber::registry().with(captured.clone());
        let _default = tracing::subscriber::set_default(subscriber);

        let service = CallTraceLayer::server().layer(service_fn(ok));
        let request = Request::builder().uri("/echo.Echo/Echo").body(()).unwrap();
        let response = service.oneshot(request).await.unwrap();
        response.into_body().collect().await.unwrap();

        let span = captured.span("rpc.server");
        assert_eq!(span["otel.name"], "echo.Echo/Echo");
        assert_eq!(span["otel.kind"], "server");
        assert_eq!(span["rpc.system"], "grpc");
        assert_eq!(span["rpc.service"], "echo.Echo");
        assert_eq!(span["rpc.method"], "Echo");
        assert_eq!(span["rpc.grpc.status_code"], "5");
        assert!(
            !span.contains_key("otel.status_code"),
            "NOT_FOUND is the caller's fault, not the server's"
        );
        assert_eq!(
            captured.event_span("handler runs").as_deref(),
            Some("rpc.server"),
            "the handler runs inside the call's span"
        );
    }

    #[tokio::test]
    async fn no_span_is_made_when_nobody_listens_or_tracing_is_off() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::registry().with(captured.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let request = || Request::builder().uri("/echo.Echo/Echo").body(()).unwrap();
        CallTraceLayer::disabled()
            .layer(service_fn(ok))
            .oneshot(request())
            .await
            .unwrap();
        assert!(captured.spans().is_empty());
        drop(_default);
        // No subscriber at all: the span is disabled and the call goes through.
        let response = CallTraceLayer::client()
            .layer(service_fn(ok))
            .oneshot(request())
            .await
            .unwrap();
        assert_eq!(response.headers()["grpc-status"], "5");
    }

    #[tokio::test]
    async fn stable_conventions_name_the_status_and_the_failure() {
        let captured = Captured::default();
        // A second live dispatcher, as in the test above (callsite interest caching).
        let _second_dispatcher =
            tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
        let subscriber = tracing_subscriber::registry().with(captured.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let request = || Request::builder().uri("/echo.Echo/Echo").body(()).unwrap();
        for layer in [CallTraceLayer::server(), CallTraceLayer::client()] {
            let layer = layer.with_conventions(RpcConventions::Stable);
            let response = layer.layer(service_fn(ok)).oneshot(request()).await;
            response.unwrap().into_body().collect().await.unwrap();
        }

        let server = captured.span("rpc.server");
        assert_eq!(server["rpc.system.name"], "grpc");
        assert_eq!(server["rpc.method"], "echo.Echo/Echo");
        assert_eq!(server["rpc.response.status_code"], "NOT_FOUND");
        assert!(!server.contains_key("rpc.service"), "{server:?}");
        assert!(!server.contains_key("rpc.grpc.status_code"), "{server:?}");
        assert!(
            !server.contains_key("error.type"),
            "NOT_FOUND is the caller's fault, not the server's"
        );
        let client = captured.span("rpc.client");
        assert_eq!(client["server.address"], "echo.Echo");
        assert_eq!(client["rpc.response.status_code"], "NOT_FOUND");
        assert_eq!(
            client["error.type"], "NOT_FOUND",
            "every code but OK fails a client"
        );
        assert_eq!(client["otel.status_code"], "ERROR");
    }
}
