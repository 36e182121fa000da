//! The provider filter: admit a request under the limit, or refuse it at once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use rpc_core::metadata::is_health_check;
use tonic::body::Body as TonicBody;
use tower_layer::Layer;
use tower_service::Service;

use super::limiter::{ConcurrencyLimiter, Permit};
use crate::call_end::{OnCallEnd, watch};
use crate::refusal::{NotExecuted, RefusalFuture};

/// Applies [`ConcurrencyLimit`] to a service (tonic routes). Built with no limiter
/// ([`ConcurrencyLimitLayer::disabled`]) it passes every request through.
#[derive(Clone, Debug)]
pub struct ConcurrencyLimitLayer {
    limiter: Option<ConcurrencyLimiter>,
}

impl ConcurrencyLimitLayer {
    /// A layer that admits requests under `limiter`'s limit.
    pub fn new(limiter: ConcurrencyLimiter) -> Self {
        Self {
            limiter: Some(limiter),
        }
    }

    /// A layer that limits nothing.
    pub fn disabled() -> Self {
        Self { limiter: None }
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimit {
            inner,
            limiter: self.limiter.clone(),
        }
    }
}

/// The provider's adaptive concurrency limit. A request (other than a health check)
/// takes a place under the limit until its response body ends; when none is free it is
/// answered at once, without running, as a trailers-only `RESOURCE_EXHAUSTED` with
/// `rpc-not-executed: overloaded` ([`NotExecuted::Overloaded`]), once its body arrived
/// (`refusal.rs`).
#[derive(Clone, Debug)]
pub struct ConcurrencyLimit<S> {
    inner: S,
    limiter: Option<ConcurrencyLimiter>,
}

impl<S, B> Service<Request<B>> for ConcurrencyLimit<S>
where
    S: Service<Request<B>, Response = Response<TonicBody>>,
    B: Body,
{
    type Response = Response<TonicBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let permit = match &self.limiter {
            Some(limiter) if !is_health_check(request.uri().path()) => {
                match limiter.try_acquire() {
                    Some(permit) => Some(permit),
                    None => {
                        return ResponseFuture::Refused {
                            refusal: NotExecuted::Overloaded.refuse(request.into_body()),
                        };
                    }
                }
            }
            _ => None,
        };
        ResponseFuture::Admitted {
            inner: self.inner.call(request),
            permit,
        }
    }
}

/// A permit ends with its call: when the response body ends, or is dropped.
impl OnCallEnd for Permit {
    fn call_ended(self, _code: tonic::Code) {
        self.finish();
    }
}

pin_project! {
    /// Future of [`ConcurrencyLimit`]. Its `Refused` arm is the graceful filter's (both
    /// refuse through `refusal.rs`); its `Admitted` arm only moves the permit into the
    /// body, and leaves a body without one as it is (the graceful filter's future marks
    /// and wraps every response: merged, this one would pay for that on every call).
    #[project = Projection]
    pub enum ResponseFuture<F, B> {
        /// The request runs; its permit moves into the response body.
        Admitted {
            #[pin]
            inner: F,
            permit: Option<Permit>,
        },
        /// The request is refused without running ("overloaded, not executed"), once
        /// its body has arrived (`refusal.rs`).
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
    type Output = Result<Response<TonicBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Admitted { inner, permit } => {
                // An error drops the permit with the future: the call has ended.
                let response = std::task::ready!(inner.poll(cx))?;
                Poll::Ready(Ok(match permit.take() {
                    Some(permit) => response.map(|body| TonicBody::new(watch(body, Some(permit)))),
                    None => response,
                }))
            }
            Projection::Refused { refusal } => refusal.poll(cx).map(Ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use http_body_util::BodyExt;
    use tokio::sync::Semaphore;
    use tower::{ServiceExt, service_fn};

    use rpc_core::metadata::NOT_EXECUTED;

    use super::*;
    use crate::limit::GradientConfig;

    fn request(path: &str) -> Request<TonicBody> {
        Request::builder()
            .uri(path)
            .body(TonicBody::empty())
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn over_the_limit_a_request_is_refused_without_running_and_health_passes() {
        let limiter = ConcurrencyLimiter::new(GradientConfig {
            initial_limit: 2,
            min_limit: 2,
            max_limit: 2,
            ..GradientConfig::default()
        });
        let ran = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Semaphore::new(0));
        let service = ConcurrencyLimitLayer::new(limiter.clone()).layer(service_fn({
            let (ran, gate) = (ran.clone(), gate.clone());
            move |req: Request<TonicBody>| {
                let (ran, gate) = (ran.clone(), gate.clone());
                let health = is_health_check(req.uri().path());
                async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    if !health && let Ok(permit) = gate.acquire().await {
                        permit.forget();
                    }
                    let body = http_body_util::Full::new(bytes::Bytes::from_static(b"reply"));
                    Ok::<_, Infallible>(Response::new(TonicBody::new(body)))
                }
            }
        }));

        let first = tokio::spawn(service.clone().oneshot(request("/echo.Echo/Echo")));
        let second = tokio::spawn(service.clone().oneshot(request("/echo.Echo/Echo")));
        while ran.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(limiter.inflight(), 2);

        let refused = service
            .clone()
            .oneshot(request("/echo.Echo/Echo"))
            .await
            .unwrap();
        assert_eq!(refused.headers().get(NOT_EXECUTED).unwrap(), "overloaded");
        assert_eq!(refused.headers().get("grpc-status").unwrap(), "8");
        assert_eq!(ran.load(Ordering::SeqCst), 2, "the handler did not run");
        assert_eq!(limiter.refused(), 1);

        // A health check is never limited.
        let health = service
            .clone()
            .oneshot(request("/grpc.health.v1.Health/Check"))
            .await
            .unwrap();
        assert!(health.headers().get(NOT_EXECUTED).is_none());
        assert_eq!(ran.load(Ordering::SeqCst), 3);

        // A place is held until the response body ends.
        gate.add_permits(3);
        let first = first.await.unwrap().unwrap();
        second
            .await
            .unwrap()
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap();
        assert_eq!(limiter.inflight(), 1);
        first.into_body().collect().await.unwrap();
        assert_eq!(limiter.inflight(), 0);
        let admitted = service.oneshot(request("/echo.Echo/Echo")).await.unwrap();
        assert!(admitted.headers().get(NOT_EXECUTED).is_none());
    }

    #[tokio::test]
    async fn disabled_it_passes_everything() {
        let service =
            ConcurrencyLimitLayer::disabled().layer(service_fn(|_req: Request<TonicBody>| async {
                Ok::<_, Infallible>(Response::new(TonicBody::empty()))
            }));
        for _ in 0..3 {
            let response = service
                .clone()
                .oneshot(request("/echo.Echo/Echo"))
                .await
                .unwrap();
            assert!(response.headers().get(NOT_EXECUTED).is_none());
        }
    }
}
