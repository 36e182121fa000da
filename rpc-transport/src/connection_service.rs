//! The service hyper calls for each request of one connection: the connection's tower
//! stack, called in place.
//!
//! hyper's `Service::call` takes `&self`, tower's `&mut self`; hyper-util's
//! `TowerToHyperService` bridges the two by cloning the whole stack for every request
//! and driving the clone through `poll_ready` and `call`. Our provider stack is a dozen
//! layers deep, and that clone and its drop cost about 700 instructions per call
//! (callgrind, `benches/instructions.sh`). hyper calls a connection's service from the
//! connection's own task, one request at a time, so the stack is kept behind an
//! uncontended lock instead and called directly when it is ready — as every layer of
//! ours and tonic's generated servers always are. A stack that is not ready (an
//! application layer with backpressure) is cloned and waited on as before.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use pin_project_lite::pin_project;
use tower::Service;
use tower::util::{Oneshot, ServiceExt};

/// One connection's tower service, as hyper calls it.
pub(crate) struct ConnectionService<S> {
    service: Mutex<S>,
}

impl<S> ConnectionService<S> {
    /// Serves a connection's requests with `service`.
    pub(crate) fn new(service: S) -> Self {
        Self {
            service: Mutex::new(service),
        }
    }
}

impl<S, R> hyper::service::Service<R> for ConnectionService<S>
where
    S: Service<R> + Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ConnectionFuture<S, R>;

    fn call(&self, request: R) -> Self::Future {
        let mut service = self.service.lock();
        // Asked without a waker to keep: a stack that is not ready is not waited on
        // here but through a clone of its own, which registers the request's task.
        let mut probe = Context::from_waker(Waker::noop());
        match service.poll_ready(&mut probe) {
            Poll::Ready(Ok(())) => ConnectionFuture::Called {
                future: service.call(request),
            },
            Poll::Ready(Err(error)) => ConnectionFuture::Failed { error: Some(error) },
            Poll::Pending => ConnectionFuture::Waiting {
                oneshot: service.clone().oneshot(request),
            },
        }
    }
}

pin_project! {
    /// Future of [`ConnectionService`].
    #[project = Projection]
    pub(crate) enum ConnectionFuture<S: Service<R>, R> {
        /// The stack was ready and called.
        Called { #[pin] future: S::Future },
        /// The stack failed before the call.
        Failed { error: Option<S::Error> },
        /// The stack was not ready: a clone waits to be, then calls.
        Waiting { #[pin] oneshot: Oneshot<S, R> },
    }
}

impl<S: Service<R>, R> Future for ConnectionFuture<S, R> {
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Called { future } => future.poll(cx),
            Projection::Failed { error } => match error.take() {
                Some(error) => Poll::Ready(Err(error)),
                // Polled again after its end, as a fused future would be.
                None => Poll::Pending,
            },
            Projection::Waiting { oneshot } => oneshot.poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hyper::service::Service as _;

    use super::*;

    /// Counts its clones; not ready for its first `not_ready` polls of `poll_ready`
    /// (counted across clones), then answers with the request doubled.
    struct Counted {
        clones: Arc<AtomicUsize>,
        polls: Arc<AtomicUsize>,
        not_ready: usize,
    }

    impl Counted {
        fn new(not_ready: usize) -> (Self, Arc<AtomicUsize>) {
            let clones = Arc::new(AtomicUsize::new(0));
            let service = Self {
                clones: clones.clone(),
                polls: Arc::default(),
                not_ready,
            };
            (service, clones)
        }
    }

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.clones.fetch_add(1, Ordering::Relaxed);
            Self {
                clones: self.clones.clone(),
                polls: self.polls.clone(),
                not_ready: self.not_ready,
            }
        }
    }

    impl Service<u32> for Counted {
        type Response = u32;
        type Error = Infallible;
        type Future = std::future::Ready<Result<u32, Infallible>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            if self.polls.fetch_add(1, Ordering::Relaxed) < self.not_ready {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: u32) -> Self::Future {
            std::future::ready(Ok(request * 2))
        }
    }

    #[tokio::test]
    async fn a_ready_stack_is_called_in_place() {
        let (service, clones) = Counted::new(0);
        let connection = ConnectionService::new(service);
        for n in 0..5 {
            assert_eq!(connection.call(n).await, Ok(n * 2));
        }
        assert_eq!(clones.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_stack_not_ready_is_waited_on_through_a_clone() {
        let (service, clones) = Counted::new(3);
        let connection = ConnectionService::new(service);
        assert_eq!(connection.call(4).await, Ok(8));
        assert_eq!(clones.load(Ordering::Relaxed), 1);
        assert_eq!(connection.call(5).await, Ok(10));
        assert_eq!(clones.load(Ordering::Relaxed), 1, "ready by now: no clone");
    }
}
