//! The response future of a watched call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use super::{CallEndBody, OnCallEnd, StatusOfError, code_in_response, watch};

pin_project! {
    /// Resolves to the inner future's response, its body wrapped in a [`CallEndBody`]
    /// that ends the call; a trailers-only response or an error ends it here.
    pub struct CallEndFuture<F, E> {
        #[pin]
        inner: F,
        end: Option<E>,
    }
}

impl<F, E> CallEndFuture<F, E> {
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
