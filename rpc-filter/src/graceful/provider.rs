//! The provider side of graceful offline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use rpc_core::metadata::{self, CLOSING, CLOSING_VALUE, STREAM_MOVED, is_health_check};
use rpc_core::{
    BodyEnd, BodyGuard, DeployAction, GuardedBody, InflightGuard, ProviderHandles, StreamDrain,
};
use tonic::body::Body as TonicBody;
use tower_layer::Layer;
use tower_service::Service;

use crate::refusal::{NotExecuted, RefusalFuture};

/// Applies [`ProviderGraceful`] to a service (tonic routes).
#[derive(Clone, Debug)]
pub struct ProviderGracefulLayer {
    handles: Arc<ProviderHandles>,
}

impl ProviderGracefulLayer {
    /// A layer driven by the phase in `handles` and counting into its inbound counter,
    /// request clock and rejection counter (from `Lifecycle::provider_handles`).
    pub fn new(handles: ProviderHandles) -> Self {
        Self {
            handles: Arc::new(handles),
        }
    }
}

impl<S> Layer<S> for ProviderGracefulLayer {
    type Service = ProviderGraceful<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ProviderGraceful {
            inner,
            handles: self.handles.clone(),
        }
    }
}

/// The provider filter of graceful offline. For each request:
/// 1. counts it in the inbound counter (until its response body ends) and notes its
///    arrival time;
/// 2. from shutdown step 3 on, answers it with `UNAVAILABLE` plus
///    `rpc-not-executed: closing` without running it, once its body arrived
///    (`refusal.rs`) (our consumers re-send it
///    elsewhere; the transport refuses the stream instead, with `REFUSED_STREAM`, for
///    a client that is not an rpc consumer — see `lossless_rpc_core::transport`);
/// 3. from shutdown step 1 on, and while its service is manually offline, adds
///    `rpc-closing: 1` to its response headers so the consumer stops choosing this
///    instance before the registry tells it. Whether the service is offline is read when
///    the request arrives (one atomic load while nothing is offline); a whole-instance
///    offline, like the phase, is read again when the response is ready.
///
/// The handles sit behind one `Arc`: a stack that is not ready is cloned for a request
/// (lossless-rpc-transport's `connection_service.rs`), and one reference count is all
/// that clone should cost.
#[derive(Clone, Debug)]
pub struct ProviderGraceful<S> {
    inner: S,
    handles: Arc<ProviderHandles>,
}

/// The response body of a call through [`ProviderGraceful`]: the handler's, holding
/// the call's [`ServedCall`] until it ends (none for a health check or a refusal). Not
/// boxed again: the filters around this one wrap it, and the stack is boxed once.
pub type ServedBody = GuardedBody<TonicBody, ServedCall>;

impl<S, B> Service<Request<B>> for ProviderGraceful<S>
where
    S: Service<Request<B>, Response = Response<TonicBody>>,
    B: Body,
{
    type Response = Response<ServedBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let handles = &*self.handles;
        let offline = handles.offline.covers(request.uri().path());
        // Health checks are answered during shutdown (NOT_SERVING), and neither count as
        // traffic for the offline window nor delay the drain: a probe every few seconds
        // must not hold an idle provider open.
        if is_health_check(request.uri().path()) {
            return ResponseFuture::Admitted {
                inner: self.inner.call(request),
                guard: None,
                handles: self.handles.clone(),
                offline,
            };
        }
        let guard = ServedCall {
            inflight: handles.inbound.acquire(),
            streams: handles.streams.clone(),
        };
        let phase = handles.phase.get();
        // Only shutdown step 2 reads when the latest request arrived, and only requests
        // after its start count: serving, a request reads no clock for it.
        if phase.is_closing() {
            handles.requests.touch();
        }
        if phase.rejects_inbound() {
            drop(guard);
            handles.rejections.note();
            // The call's span is current: the step that refused it is linked to it.
            handles
                .streams
                .step_span()
                .link_current_call(DeployAction::Refused);
            return ResponseFuture::Refused {
                refusal: NotExecuted::Closing.refuse(request.into_body()),
            };
        }
        // The handler's way to learn that this instance goes offline (`DrainNotice::of`).
        let notice = handles.streams.notice_of(request.uri());
        request.extensions_mut().insert(notice);
        ResponseFuture::Admitted {
            inner: self.inner.call(request),
            guard: Some(guard),
            handles: self.handles.clone(),
            offline,
        }
    }
}

pin_project! {
    /// Future of [`ProviderGraceful`]. Its `Refused` arm is the concurrency limit's
    /// (both refuse through `refusal.rs`); its `Admitted` arm is its own: it marks a
    /// closing response and counts a moved stream when the headers are ready, and wraps
    /// every body in [`ServedBody`] (the type the filters above it name), where the
    /// limit's wraps only a body that holds a permit.
    #[project = Projection]
    pub enum ResponseFuture<F, B> {
        /// The request runs; its guard moves into the response body, and the phase
        /// (and manual offline) read when its headers are ready decides the closing
        /// mark.
        Admitted {
            #[pin]
            inner: F,
            guard: Option<ServedCall>,
            handles: Arc<ProviderHandles>,
            // Its service was manually offline when the request arrived.
            offline: bool,
        },
        /// The request is refused without running ("closing, not executed"), once its
        /// body has arrived (`refusal.rs`).
        Refused {
            #[pin]
            refusal: RefusalFuture<B>,
        },
    }
}

impl<F, B, E> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<Response<TonicBody>, E>>,
    B: Body,
{
    type Output = Result<Response<ServedBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Admitted {
                inner,
                guard,
                handles,
                offline,
            } => {
                let mut response = std::task::ready!(inner.poll(cx))?;
                if *offline || handles.phase.get().is_closing() || handles.offline.all() {
                    response.headers_mut().insert(CLOSING, CLOSING_VALUE);
                }
                // A handler that returned the moved status before its stream began (a
                // trailers-only response); one that ends its stream so is counted at the
                // trailers (`ServedCall`). Only looked for once a stream may have been
                // told, as at the trailers.
                if handles.streams.may_have_told()
                    && metadata::header(response.headers(), &STREAM_MOVED).is_some()
                {
                    handles.streams.note_moved();
                }
                let guard = guard.take();
                Poll::Ready(Ok(response.map(|body| GuardedBody::with(body, guard))))
            }
            Projection::Refused { refusal } => refusal
                .poll(cx)
                .map(|response| Ok(response.map(|body| GuardedBody::with(body, None)))),
        }
    }
}

/// What an admitted call holds until its response ends: its place in the inbound count,
/// and the count of streams moved, told when the trailers say so.
#[derive(Debug)]
pub struct ServedCall {
    inflight: InflightGuard,
    streams: StreamDrain,
}

impl BodyGuard for ServedCall {
    fn body_ended(self, end: BodyEnd<'_>) -> Option<Self> {
        // A stream ends as moved only once told: until then its trailers are not looked
        // at (one lookup less per call).
        if let BodyEnd::Trailers(trailers) = end
            && self.streams.may_have_told()
            && metadata::header(trailers, &STREAM_MOVED).is_some()
        {
            self.streams.note_moved();
        }
        drop(self.inflight);
        None
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use http_body_util::BodyExt;
    use rpc_core::Phase;
    use rpc_lifecycle::{Lifecycle, ShutdownConfig};
    use tokio::sync::oneshot;
    use tower::{ServiceExt, service_fn};

    use rpc_core::metadata::NOT_EXECUTED;

    use super::*;

    fn config() -> ShutdownConfig {
        let mut config = ShutdownConfig::default();
        config.consumer_update_wait_time = Duration::from_secs(10);
        config.offline_request_window_timeout = Duration::from_secs(1);
        config.step_timeout = Duration::from_secs(5);
        config.internal_signal = false;
        config
    }

    /// A plan with one listener (on a free loopback port), so that the lifecycle has a
    /// service whose consumers step 2 waits for.
    fn provider_plan() -> rpc_lifecycle::StartPlan {
        let service = tower::util::BoxCloneSyncService::new(service_fn(
            |_req: Request<hyper::body::Incoming>| async {
                Ok::<_, Infallible>(Response::new(TonicBody::empty()))
            },
        ));
        rpc_lifecycle::StartPlan {
            exports: vec![rpc_lifecycle::Export {
                bind: "127.0.0.1:0".parse().unwrap(),
                listener: None,
                advertise_host: None,
                options: Default::default(),
                service,
                services: Vec::new(),
            }],
            ..Default::default()
        }
    }

    async fn wait_phase(lifecycle: &Lifecycle, phase: Phase) {
        let mut rx = lifecycle.watch_phase();
        rx.wait_for(|p| *p >= phase).await.unwrap();
    }

    fn request(path: &str) -> Request<TonicBody> {
        Request::builder()
            .uri(path)
            .body(TonicBody::empty())
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn marks_then_rejects_and_the_drain_waits_for_admitted_requests() {
        let lifecycle = Lifecycle::new("test", config());
        lifecycle.start(provider_plan()).await.unwrap();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let release_rx = std::sync::Arc::new(parking_lot_free::Slot::new(release_rx));
        let service = ProviderGracefulLayer::new(lifecycle.provider_handles()).layer(service_fn(
            move |_req: Request<TonicBody>| {
                let release = release_rx.take();
                async move {
                    if let Some(release) = release {
                        let _ = release.await;
                    }
                    let body = http_body_util::Full::new(bytes::Bytes::from_static(b"reply"));
                    Ok::<_, Infallible>(Response::new(TonicBody::new(body)))
                }
            },
        ));

        // Serving: no mark.
        let slow = tokio::spawn(service.clone().oneshot(request("/echo.Echo/Echo")));
        tokio::task::yield_now().await;
        assert_eq!(lifecycle.inbound().current(), 1);

        let shutdown = tokio::spawn(lifecycle.before_shutdown());
        wait_phase(&lifecycle, Phase::WaitingForConsumers).await;
        let marked = service
            .clone()
            .oneshot(request("/echo.Echo/Echo"))
            .await
            .unwrap();
        assert_eq!(marked.headers().get(CLOSING).unwrap(), "1");
        assert!(marked.headers().get(NOT_EXECUTED).is_none());
        drop(marked);

        wait_phase(&lifecycle, Phase::DrainingInbound).await;
        let rejected = service
            .clone()
            .oneshot(request("/echo.Echo/Echo"))
            .await
            .unwrap();
        assert_eq!(rejected.headers().get(NOT_EXECUTED).unwrap(), "closing");
        assert_eq!(rejected.headers().get("grpc-status").unwrap(), "14");

        // The health service is still answered, not rejected.
        let health = service
            .clone()
            .oneshot(request("/grpc.health.v1.Health/Check"))
            .await
            .unwrap();
        assert!(health.headers().get(NOT_EXECUTED).is_none());

        // The drain waits for the slow request, whose body must end first.
        assert_eq!(lifecycle.phase(), Phase::DrainingInbound);
        release_tx.send(()).unwrap();
        let response = slow.await.unwrap().unwrap();
        assert_eq!(
            lifecycle.inbound().current(),
            1,
            "counted until the body ends"
        );
        response.into_body().collect().await.unwrap();
        assert_eq!(lifecycle.inbound().current(), 0);

        let report = shutdown.await.unwrap();
        assert_eq!(report.rejected, 1);
        assert_eq!(report.inbound_left, 0);
        assert_eq!(report.exit_code(), 0);
    }

    /// A lifecycle serving `helloworld.Greeter` and `echo.Echo` (registered nowhere) on
    /// a free loopback port, so that services can be taken offline.
    async fn serving_two_services() -> Lifecycle {
        let lifecycle = Lifecycle::new("test", config());
        let service = tower::util::BoxCloneSyncService::new(service_fn(
            |_req: Request<hyper::body::Incoming>| async {
                Ok::<_, Infallible>(Response::new(TonicBody::empty()))
            },
        ));
        let services = ["helloworld.Greeter", "echo.Echo"]
            .map(|name| rpc_lifecycle::ExportedService::new(rpc_core::ServiceKey::new(name)));
        let plan = rpc_lifecycle::StartPlan {
            exports: vec![rpc_lifecycle::Export {
                bind: "127.0.0.1:0".parse().unwrap(),
                listener: None,
                advertise_host: None,
                options: Default::default(),
                service,
                services: services.into(),
            }],
            ..Default::default()
        };
        lifecycle.start(plan).await.unwrap();
        lifecycle
    }

    /// Whether the response to a request for `path` carries the closing mark; panics if
    /// the request was refused rather than served.
    async fn marked<S>(service: &S, path: &str) -> bool
    where
        S: Service<Request<TonicBody>, Response = Response<ServedBody>> + Clone,
        S::Error: std::fmt::Debug,
    {
        let response = service.clone().oneshot(request(path)).await.unwrap();
        assert!(response.headers().get(NOT_EXECUTED).is_none(), "served");
        response.headers().get(CLOSING).is_some()
    }

    /// A manually offline service's responses carry the closing mark, the others' do
    /// not, and every request is served; online clears the mark.
    #[tokio::test(start_paused = true)]
    async fn a_manually_offline_service_is_served_with_the_closing_mark() {
        let lifecycle = serving_two_services().await;
        let service = ProviderGracefulLayer::new(lifecycle.provider_handles()).layer(service_fn(
            |_req: Request<TonicBody>| async {
                Ok::<_, Infallible>(Response::new(TonicBody::empty()))
            },
        ));
        let greeter = "/helloworld.Greeter/SayHello";
        let echo = "/echo.Echo/Echo";
        assert!(!marked(&service, greeter).await);

        lifecycle
            .offline(|key| &*key.interface == "helloworld.Greeter")
            .await
            .unwrap();
        assert!(marked(&service, greeter).await);
        assert!(!marked(&service, echo).await);

        lifecycle.offline(|_| true).await.unwrap();
        assert!(marked(&service, echo).await);

        lifecycle.online(|_| true).await.unwrap();
        assert!(!marked(&service, greeter).await);
        assert!(!marked(&service, echo).await);
    }

    /// A one-shot slot so the first call of a `Fn` service can take the receiver.
    mod parking_lot_free {
        use std::sync::Mutex;

        pub struct Slot<T>(Mutex<Option<T>>);

        impl<T> Slot<T> {
            pub fn new(value: T) -> Self {
                Self(Mutex::new(Some(value)))
            }

            pub fn take(&self) -> Option<T> {
                self.0.lock().unwrap().take()
            }
        }
    }
}
