//! The consumer side of graceful offline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use rpc_core::{ConsumerHandles, GuardedBody, InflightGuard};
use tower_layer::Layer;
use tower_service::Service;

/// Applies [`ConsumerGraceful`] to a reference's channel.
#[derive(Clone, Debug)]
pub struct ConsumerGracefulLayer {
    handles: Arc<ConsumerHandles>,
}

impl ConsumerGracefulLayer {
    /// A layer counting into the outbound counter in `handles` and refusing calls by
    /// its phase (from `Lifecycle::consumer_handles`).
    pub fn new(handles: ConsumerHandles) -> Self {
        Self {
            handles: Arc::new(handles),
        }
    }
}

impl<S> Layer<S> for ConsumerGracefulLayer {
    type Service = ConsumerGraceful<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConsumerGraceful {
            inner,
            handles: self.handles.clone(),
        }
    }
}

/// The consumer filter of graceful offline: counts each outbound call in the
/// outbound counter until its response body ends (shutdown step 5 waits for it), and
/// refuses new calls with `UNAVAILABLE` once outbound has been drained (step 6 on),
/// when channels are about to close. Until then this process's own code may start new
/// calls, e.g. a provider handler still finishing its work.
///
/// The handles sit behind one `Arc`: a generated client is cloned for every call, and
/// one reference count is all that clone should cost.
#[derive(Clone, Debug)]
pub struct ConsumerGraceful<S> {
    inner: S,
    handles: Arc<ConsumerHandles>,
}

impl<S, B, RB> Service<Request<B>> for ConsumerGraceful<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
{
    // The guard rides in the response body without boxing it again: generated clients
    // accept any body type.
    type Response = Response<GuardedBody<RB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, RB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let guard = self.handles.outbound.acquire();
        if self.handles.phase.get().rejects_outbound() {
            drop(guard);
            let status =
                tonic::Status::unavailable("application is shut down; outbound call not sent");
            return ResponseFuture::Refused {
                response: Some(status.into_http::<RB>().map(GuardedBody::unguarded)),
            };
        }
        ResponseFuture::Sent {
            inner: self.inner.call(request),
            guard: Some(guard),
        }
    }
}

pin_project! {
    /// Future of [`ConsumerGraceful`].
    #[project = Projection]
    pub enum ResponseFuture<F, RB> {
        /// The call was sent; its guard moves into the response body.
        Sent {
            #[pin]
            inner: F,
            guard: Option<InflightGuard>,
        },
        /// The call was refused before it was sent.
        Refused { response: Option<Response<GuardedBody<RB>>> },
    }
}

impl<F, E, RB> Future for ResponseFuture<F, RB>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<GuardedBody<RB>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Sent { inner, guard } => {
                let response = std::task::ready!(inner.poll(cx))?;
                let guard = guard.take().expect("polled after completion");
                Poll::Ready(Ok(response.map(|body| GuardedBody::new(body, guard))))
            }
            Projection::Refused { response } => {
                Poll::Ready(Ok(response.take().expect("polled after completion")))
            }
        }
    }
}
