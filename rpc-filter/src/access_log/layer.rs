//! The access-log filter as a tower layer and service.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use rpc_core::{CallContext, TraceContext};
use tonic::transport::server::TcpConnectInfo;
use tower_layer::Layer;
use tower_service::Service;

use super::line::LineEnd;
use super::sink::AccessLogSink;
use crate::call_end::{CallEndBody, CallEndFuture, StatusOfError};
use crate::trace::Side;

/// Applies [`AccessLog`] to a service on one side of a call; built without a sink
/// ([`AccessLogLayer::disabled`]) it passes calls through.
#[derive(Clone, Debug)]
pub struct AccessLogLayer {
    target: Option<(AccessLogSink, Arc<str>, Side)>,
}

impl AccessLogLayer {
    /// Lines of the calls on `side` of the application `application`, into `sink`.
    pub fn new(sink: AccessLogSink, application: &str, side: Side) -> Self {
        Self {
            target: Some((sink, application.into(), side)),
        }
    }

    /// No access log: the service only passes calls through.
    pub fn disabled() -> Self {
        Self { target: None }
    }
}

impl<S> Layer<S> for AccessLogLayer {
    type Service = AccessLog<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AccessLog {
            inner,
            target: self.target.clone(),
        }
    }
}

/// Writes one line per call when its response ends (see the module documentation).
#[derive(Clone, Debug)]
pub struct AccessLog<S> {
    inner: S,
    target: Option<(AccessLogSink, Arc<str>, Side)>,
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for AccessLog<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Error: StatusOfError,
{
    type Response = Response<CallEndBody<ResponseBody, LineEnd>>;
    type Error = S::Error;
    type Future = CallEndFuture<S::Future, LineEnd>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let end = self.target.as_ref().map(|(sink, application, side)| {
            let peer = request
                .extensions()
                .get::<TcpConnectInfo>()
                .and_then(TcpConnectInfo::remote_addr);
            let trace_id = trace_id(&request);
            LineEnd::start(
                sink.clone(),
                application.clone(),
                *side,
                request.uri().path(),
                peer,
            )
            .with_trace_id(trace_id)
        });
        CallEndFuture::new(self.inner.call(request), end)
    }
}

/// The trace `request`'s call belongs to: a provider's call carries its context from
/// the transport; a consumer's call is in the trace its own `traceparent` names when the
/// application wrote one, else in the trace of the call it is made inside, if any.
fn trace_id<B>(request: &Request<B>) -> Option<u128> {
    if let Some(served) = request.extensions().get::<CallContext>() {
        return served.trace().map(TraceContext::trace_id);
    }
    match TraceContext::from_headers(request.headers()) {
        Some(own) => Some(own.trace_id()),
        None => {
            CallContext::current().and_then(|served| served.trace().map(TraceContext::trace_id))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::io::Write;
    use std::sync::Mutex;

    use bytes::Bytes;
    use http_body_util::BodyExt;
    use tower::{ServiceExt, service_fn};

    use super::*;

    /// Collects what the writer writes.
    #[derive(Clone, Default)]
    struct Collected(Arc<Mutex<Vec<u8>>>);

    impl Write for Collected {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_call_ends_in_one_json_line_with_its_status() {
        let collected = Collected::default();
        let sink = AccessLogSink::to_writer(Box::new(collected.clone())).unwrap();
        let service = AccessLogLayer::new(sink.clone(), "demo", Side::Server).layer(service_fn(
            |_request: Request<()>| async {
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("5"));
                let body = http_body_util::StreamBody::new(futures_util::stream::iter([
                    Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"m"))),
                    Ok(http_body::Frame::trailers(trailers)),
                ]));
                Ok::<_, Infallible>(Response::new(body))
            },
        ));
        let request = Request::builder().uri("/echo.Echo/Echo").body(()).unwrap();
        let response = service.oneshot(request).await.unwrap();
        assert!(collected.0.lock().unwrap().is_empty(), "not before the end");
        response.into_body().collect().await.unwrap();
        drop(sink);
        // The writer thread writes the line: wait for it, bounded.
        let written = async {
            loop {
                let text = String::from_utf8(collected.0.lock().unwrap().clone()).unwrap();
                if text.ends_with('\n') {
                    return text;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        };
        let text = tokio::time::timeout(std::time::Duration::from_secs(5), written)
            .await
            .expect("the writer writes the line");
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["side"], "server");
        assert_eq!(line["application"], "demo");
        assert_eq!(line["rpc.service"], "echo.Echo");
        assert_eq!(line["rpc.method"], "Echo");
        assert_eq!(line["rpc.grpc.status_code"], 5);
        assert!(line["duration_ms"].as_f64().unwrap() >= 0.0);
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(text.lines().count(), 1);
    }

    #[tokio::test]
    async fn a_consumers_line_names_the_trace_its_own_traceparent_names_before_the_served_one() {
        let served = TraceContext::new_root();
        let own = "00-11111111111111111111111111111111-2222222222222222-01";
        let (with_own, without) = CallContext::new()
            .with_trace(served.clone())
            .scope(async {
                let with_own = Request::builder()
                    .uri("/echo.Echo/Echo")
                    .header("traceparent", own)
                    .body(())
                    .unwrap();
                let without = Request::builder().uri("/echo.Echo/Echo").body(()).unwrap();
                (trace_id(&with_own), trace_id(&without))
            })
            .await;
        assert_eq!(with_own, Some(0x1111_1111_1111_1111_1111_1111_1111_1111));
        assert_eq!(without, Some(served.trace_id()), "the served call's trace");
    }
}
