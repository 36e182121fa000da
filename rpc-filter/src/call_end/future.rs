//! The response future of a watched call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use super::{CallEndBody, OnCallEnd, StatusOfError, code_in_response, code_when_dropped, watch};

pin_project! {
    /// Resolves to the inner future's response, its body wrapped in a [`CallEndBody`]
    /// that ends the call; a trailers-only response or an error ends it here. Dropped
    /// before it resolved, the call ends too: as `DEADLINE_EXCEEDED` when the served
    /// call's deadline has passed (the provider's transport drops the handler then), else
    /// as `CANCELLED` (the caller went away) — so a call cut short is still logged,
    /// counted and traced.
    pub struct CallEndFuture<F, E>
    where
        E: OnCallEnd,
    {
        #[pin]
        inner: F,
        end: Option<E>,
    }

    impl<F, E> PinnedDrop for CallEndFuture<F, E>
    where
        E: OnCallEnd,
    {
        fn drop(this: Pin<&mut Self>) {
            if let Some(end) = this.project().end.take() {
                // Dropped by the transport inside the call's context (see rpc-core's
                // `CallContext`), or because the caller went away.
                end.call_ended(code_when_dropped(rpc_core::CallContext::current_deadline()));
            }
        }
    }
}

impl<F, E: OnCallEnd> CallEndFuture<F, E> {
    /// Watches the call answered by `inner`; `end` is told when it ends (`None`: nothing
    /// to tell, e.g. metrics off or a span nobody records).
    pub fn new(inner: F, end: Option<E>) -> Self {
        Self { inner, end }
    }
}

impl<F, B, Error, E> Future for CallEndFuture<F, E>
where
    F: Future<Output = Result<Response<B>, Error>>,
    Error: StatusOfError,
    E: OnCallEnd,
{
    type Output = Result<Response<CallEndBody<B, E>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = match this.end {
            Some(end) => end.in_scope(|| this.inner.poll(cx)),
            None => this.inner.poll(cx),
        };
        let result = std::task::ready!(result);
        let end = this.end.take();
        Poll::Ready(match result {
            Ok(response) => {
                // The status is looked up only for someone to tell; a trailers-only
                // response ends the call here, any other at its body's end.
                let end = end.and_then(|end| match code_in_response(&response) {
                    Some(code) => {
                        end.call_ended(code);
                        None
                    }
                    None => Some(end),
                });
                Ok(response.map(|body| watch(body, end)))
            }
            Err(error) => {
                if let Some(end) = end {
                    end.call_ended(error.status_code());
                }
                Err(error)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;
    use rpc_core::CallContext;
    use tokio::time::Instant;

    use super::*;

    /// Records the code each call ended with.
    #[derive(Clone, Default)]
    struct Ended(Arc<Mutex<Vec<tonic::Code>>>);

    impl OnCallEnd for Ended {
        fn call_ended(self, code: tonic::Code) {
            self.0.lock().push(code);
        }
    }

    type Never = std::future::Pending<Result<Response<()>, tonic::Status>>;

    fn never_answered(ended: &Ended) -> Pin<Box<CallEndFuture<Never, Ended>>> {
        Box::pin(CallEndFuture::new(
            std::future::pending(),
            Some(ended.clone()),
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_unanswered_ends_as_deadline_exceeded_or_cancelled() {
        let ended = Ended::default();
        // Dropped by the transport at the caller's deadline, inside the call's context.
        let served = CallContext::new().with_deadline(Instant::now() + Duration::from_millis(5));
        let future = never_answered(&ended);
        served
            .scope(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(future);
            })
            .await;
        // Dropped because the caller went away.
        drop(never_answered(&ended));
        assert_eq!(
            *ended.0.lock(),
            [tonic::Code::DeadlineExceeded, tonic::Code::Cancelled]
        );
    }
}
