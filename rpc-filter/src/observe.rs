//! The metrics and trace filters as one layer: one future and one body wrapper per call
//! where the two filters stacked are two of each.
//!
//! [`CallObserveLayer`] does what a [`CallMetricsLayer`] over a [`CallTraceLayer`] does —
//! the call timed from its request to the end of its response body, its span current
//! while its future and body are polled, both told the call's gRPC status at its end —
//! with one [`CallEndFuture`] holding both observers. rpc builds its provider and
//! reference stacks with it; the two filters stay usable alone.

use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::Code;
use tower_layer::Layer;
use tower_service::Service;

use crate::call_end::{CallEndBody, CallEndFuture, OnCallEnd, StatusOfError};
use crate::metrics::{CallMetricsLayer, CallTimer};
use crate::trace::{CallTraceLayer, SpanEnd, call_span};

/// Applies [`CallObserve`]: `metrics` and `trace` in one layer (either may be disabled).
#[derive(Clone, Debug)]
pub struct CallObserveLayer {
    metrics: CallMetricsLayer,
    trace: CallTraceLayer,
}

impl CallObserveLayer {
    /// The layer of `metrics` over `trace`, as one.
    pub fn new(metrics: CallMetricsLayer, trace: CallTraceLayer) -> Self {
        Self { metrics, trace }
    }
}

impl<S> Layer<S> for CallObserveLayer {
    type Service = CallObserve<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallObserve {
            inner,
            layer: self.clone(),
        }
    }
}

/// Times each call (as [`CallMetrics`](crate::metrics::CallMetrics)) and opens its span
/// (as [`CallTrace`](crate::trace::CallTrace)), watching its end once for both. With
/// metrics off and no span recorded, a call carries nothing to its end.
#[derive(Clone, Debug)]
pub struct CallObserve<S> {
    inner: S,
    layer: CallObserveLayer,
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for CallObserve<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Error: StatusOfError,
{
    type Response = Response<CallEndBody<ResponseBody, CallObservers>>;
    type Error = S::Error;
    type Future = CallEndFuture<S::Future, CallObservers>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let timer = self.layer.metrics.timer(&request);
        let (inner, span) = match self.layer.trace.side() {
            None => (self.inner.call(request), None),
            Some(side) => {
                let span = call_span(side, self.layer.trace.conventions(), &request);
                // The inner call is made inside the span too: a service may start work
                // in `call`.
                let inner = span.in_scope(|| self.inner.call(request));
                (inner, SpanEnd::new(&span, side))
            }
        };
        let observers =
            (timer.is_some() || span.is_some()).then_some(CallObservers { span, timer });
        CallEndFuture::new(inner, observers)
    }
}

/// What watches one call to its end: its span (trace) and its timer (metrics).
#[derive(Debug)]
pub struct CallObservers {
    span: Option<SpanEnd>,
    timer: Option<CallTimer>,
}

impl OnCallEnd for CallObservers {
    /// The span records the status first, then the timer, as the two filters stacked
    /// (the trace inside the metrics) did.
    fn call_ended(self, code: Code) {
        if let Some(span) = self.span {
            span.call_ended(code);
        }
        if let Some(timer) = self.timer {
            timer.call_ended(code);
        }
    }

    fn in_scope<R>(&self, poll: impl FnOnce() -> R) -> R {
        match &self.span {
            Some(span) => span.in_scope(poll),
            None => poll(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::BodyExt;
    use prometheus_client::registry::Registry;
    use tower::{ServiceExt, service_fn};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::metrics::{MethodHistograms, STATUS_CODE};
    use crate::trace::capture::Captured;

    /// One message, then trailers with status NOT_FOUND (5); logs while it answers.
    async fn serve(
        _request: Request<()>,
    ) -> Result<
        Response<http_body_util::combinators::UnsyncBoxBody<Bytes, std::convert::Infallible>>,
        std::convert::Infallible,
    > {
        tracing::debug!("handler runs");
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("5"));
        let frames = futures_util::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"reply"))),
            Ok(Frame::trailers(trailers)),
        ]);
        Ok(Response::new(
            http_body_util::StreamBody::new(frames).boxed_unsync(),
        ))
    }

    fn echo() -> Request<()> {
        Request::builder().uri("/echo.Echo/Echo").body(()).unwrap()
    }

    fn scrape(histograms: &Arc<MethodHistograms>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(histograms.clone()));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        text
    }

    #[tokio::test]
    async fn one_layer_times_the_call_and_records_its_span_at_the_end_of_the_body() {
        let captured = Captured::default();
        // A second live dispatcher, as in the trace filter's tests: callsite interest is
        // then asked of both, not cached from a parallel test's thread.
        let _second_dispatcher =
            tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
        let subscriber = tracing_subscriber::registry().with(captured.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let histograms = Arc::new(MethodHistograms::new("observed", "Test.", STATUS_CODE));
        let layer = CallObserveLayer::new(
            CallMetricsLayer::new(histograms.clone()),
            CallTraceLayer::server(),
        );

        let response = layer
            .layer(service_fn(serve))
            .oneshot(echo())
            .await
            .unwrap();
        assert!(
            !scrape(&histograms).contains("rpc_method=\"Echo\""),
            "not counted before the body ends"
        );
        response.into_body().collect().await.unwrap();

        let counted = r#"observed_seconds_count{rpc_system="grpc",rpc_service="echo.Echo",rpc_method="Echo",rpc_grpc_status_code="5"} 1"#;
        let text = scrape(&histograms);
        assert!(text.contains(counted), "{text}");
        let span = captured.span("rpc.server");
        assert_eq!(span["rpc.grpc.status_code"], "5");
        assert_eq!(
            captured.event_span("handler runs").as_deref(),
            Some("rpc.server"),
            "the handler runs inside the call's span"
        );
    }

    #[tokio::test]
    async fn with_both_off_a_call_carries_nothing_to_its_end() {
        let layer = CallObserveLayer::new(CallMetricsLayer::disabled(), CallTraceLayer::disabled());
        let response = layer
            .layer(service_fn(serve))
            .oneshot(echo())
            .await
            .unwrap();
        let collected = response.into_body().collect().await.unwrap();
        assert_eq!(collected.trailers().unwrap()["grpc-status"], "5");
    }
}
