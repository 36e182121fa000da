//! The call-duration filter as a tower layer and service.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use rpc_core::CallContext;

use super::methods::MethodHistograms;
use super::timer::CallTimer;
use crate::call_end::{CallEndBody, CallEndFuture, StatusOfError};

/// Applies [`CallMetrics`] to a service: a provider's routes or a reference's channel.
#[derive(Clone, Debug)]
pub struct CallMetricsLayer {
    histograms: Option<Arc<MethodHistograms>>,
}

impl CallMetricsLayer {
    /// A layer timing every call into `histograms`.
    pub fn new(histograms: Arc<MethodHistograms>) -> Self {
        Self {
            histograms: Some(histograms),
        }
    }

    /// A layer that times nothing (metrics off): its service only passes calls through.
    pub fn disabled() -> Self {
        Self { histograms: None }
    }

    /// The timer of the call `request` starts, started now; `None` when disabled.
    pub(crate) fn timer<B>(&self, request: &Request<B>) -> Option<CallTimer> {
        start_timer(self.histograms.as_ref(), request)
    }
}

/// The timer of the call `request` starts, counted in `histograms`, started now, with
/// the call's trace for its bucket's exemplar; none without histograms.
fn start_timer<B>(
    histograms: Option<&Arc<MethodHistograms>>,
    request: &Request<B>,
) -> Option<CallTimer> {
    let histograms = histograms?;
    Some(CallTimer::start(histograms, request.uri().path()).in_trace(call_trace(request)))
}

/// The trace and span ids of the call `request` starts, when its trace is sampled: a
/// served call's (its `CallContext`, which the provider's transport put in the
/// request), else those of the served call the caller runs in (a consumer's call made
/// by a handler); none for a consumer's call made outside any.
fn call_trace<B>(request: &Request<B>) -> Option<(u128, u64)> {
    match request.extensions().get::<CallContext>() {
        Some(served) => served.sampled_ids(),
        None => CallContext::current_ids(),
    }
}

impl<S> Layer<S> for CallMetricsLayer {
    type Service = CallMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallMetrics {
            inner,
            histograms: self.histograms.clone(),
        }
    }
}

/// Times each call from its request until its response body ends (a stream's last
/// message), and counts the duration in its method's histogram under the call's gRPC
/// status code (see the module docs of [`call_end`](crate::call_end) for where the code
/// comes from). Disabled, it adds one branch per call and nothing else.
///
/// The layer for a stack that wants metrics alone. The framework's own stacks want both
/// metrics and spans, and take them as one [`CallObserve`](crate::observe::CallObserve)
/// (one future and one body wrapper per call instead of two), built from this layer's
/// settings.
#[derive(Clone, Debug)]
pub struct CallMetrics<S> {
    inner: S,
    histograms: Option<Arc<MethodHistograms>>,
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for CallMetrics<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Error: StatusOfError,
{
    type Response = Response<CallEndBody<ResponseBody, CallTimer>>;
    type Error = S::Error;
    type Future = CallEndFuture<S::Future, CallTimer>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let timer = start_timer(self.histograms.as_ref(), &request);
        CallEndFuture::new(self.inner.call(request), timer)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::BodyExt;
    use prometheus_client::registry::Registry;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::metrics::STATUS_CODE;

    fn scrape(histograms: &Arc<MethodHistograms>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(histograms.clone()));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        text
    }

    /// A gRPC-like service: one message then OK trailers for `/echo.Echo/Echo`, a
    /// trailers-only UNIMPLEMENTED for anything else.
    async fn serve(
        request: Request<()>,
    ) -> Result<Response<http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>>, Infallible>
    {
        if request.uri().path() != "/echo.Echo/Echo" {
            let response = tonic::Status::unimplemented("no such method").into_http::<()>();
            return Ok(response.map(|()| http_body_util::Empty::new().boxed_unsync()));
        }
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let frames = futures_util::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"reply"))),
            Ok(Frame::trailers(trailers)),
        ]);
        Ok(Response::new(
            http_body_util::StreamBody::new(frames).boxed_unsync(),
        ))
    }

    fn request(path: &str) -> Request<()> {
        Request::builder().uri(path).body(()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_timed_until_its_body_ends_under_its_status() {
        let histograms = Arc::new(MethodHistograms::new(
            "rpc_server_call_duration",
            "Test.",
            STATUS_CODE,
        ));
        let service = CallMetricsLayer::new(histograms.clone()).layer(service_fn(serve));
        let response = service
            .clone()
            .oneshot(request("/echo.Echo/Echo"))
            .await
            .unwrap();
        tokio::time::advance(Duration::from_millis(3)).await;
        assert!(
            !scrape(&histograms).contains("rpc_method=\"Echo\""),
            "not counted before the body ends"
        );
        response.into_body().collect().await.unwrap();
        let text = scrape(&histograms);
        let echo = r#"{rpc_system="grpc",rpc_service="echo.Echo",rpc_method="Echo",rpc_grpc_status_code="0"}"#;
        assert!(
            text.contains(&format!("rpc_server_call_duration_seconds_count{echo} 1")),
            "{text}"
        );
        assert!(
            text.contains(&format!("rpc_server_call_duration_seconds_sum{echo} 0.003")),
            "{text}"
        );

        // A method nobody serves is counted under _OTHER, not under its own labels.
        service.oneshot(request("/nope.Nope/X")).await.unwrap();
        let text = scrape(&histograms);
        assert!(!text.contains("nope.Nope"), "{text}");
        assert!(
            text.contains(
                r#"rpc_service="_OTHER",rpc_method="_OTHER",rpc_grpc_status_code="12"} 1"#
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn disabled_it_passes_calls_through() {
        let service = CallMetricsLayer::disabled().layer(service_fn(serve));
        let response = service.oneshot(request("/echo.Echo/Echo")).await.unwrap();
        let body = response.into_body().collect().await.unwrap();
        assert_eq!(body.to_bytes(), Bytes::from_static(b"reply"));
    }
}
