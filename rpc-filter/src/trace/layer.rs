//! The call-span filter as a tower layer and service.

use std::task::{Context, Poll};

use http::{Request, Response};
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
}

impl CallTraceLayer {
    /// Spans for the calls a provider serves.
    pub fn server() -> Self {
        Self {
            side: Some(Side::Server),
        }
    }

    /// Spans for the calls a consumer makes (their attempts are the cluster's spans,
    /// children of these).
    pub fn client() -> Self {
        Self {
            side: Some(Side::Client),
        }
    }

    /// No spans (tracing off): the service only passes calls through.
    pub fn disabled() -> Self {
        Self { side: None }
    }

    /// The side its spans stand for; `None` when disabled.
    pub(crate) fn side(&self) -> Option<Side> {
        self.side
    }
}

impl<S> Layer<S> for CallTraceLayer {
    type Service = CallTrace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallTrace {
            inner,
            side: self.side,
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
    side: Option<Side>,
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
        let Some(side) = self.side else {
            return CallEndFuture::new(
                self.inner.call(request).instrument(tracing::Span::none()),
                None,
            );
        };
        let span = call_span(side, &request);
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
}
