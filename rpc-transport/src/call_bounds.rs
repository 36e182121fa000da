//! The two bounds on every call a provider serves, and the status each ends it with.
//!
//! A request that is not gRPC (its `content-type`) is answered HTTP 415 (`not_grpc.rs`).
//!
//! 1. **The caller's deadline** (`grpc-timeout`): when it passes, the call ends with
//!    `DEADLINE_EXCEEDED` and its handler is dropped (cancelled), whether it was still
//!    running or already streaming its response. A malformed header ends the call at
//!    once with `INTERNAL` ([`read_grpc_timeout`](rpc_core::metadata::read_grpc_timeout)). tonic's own server
//!    bounds only the handler, not the response stream after it; a stream is where a
//!    deadline matters most. A call whose deadline left no time (`grpc-timeout: 0m`) is
//!    answered `DEADLINE_EXCEEDED` without running; every other runs inside a
//!    [`CallContext`] holding its deadline, which the handler's own reference calls
//!    inherit.
//! 2. **The server's drain bound**: when a graceful shutdown reaches its bound with a
//!    call still open (typically a long stream), the call ends with `UNAVAILABLE`,
//!    "provider shut down before the stream ended", in its trailers — instead of the
//!    connection being torn down under it, which a client reports as `UNKNOWN: h2
//!    protocol error` or a reset. The caller learns what happened; a consumer never
//!    replays such a call (it was under way, and its response had begun).
//!
//! Both end the call with a gRPC status on the stream itself, so every gRPC client
//! reads them, and the HTTP/2 stream then closes normally. On its way out, a
//! message-size status is given the code gRPC names for it (`message_size_status.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tower::Service;

use super::bounded_body::{BodyBound, BoundedBody};
use super::message_size_status;
use super::not_grpc;
use rpc_core::metadata::{NO_TIME_LEFT, deadline_exceeded, read_grpc_timeout};
use rpc_core::{BoxError, CallContext, TraceContext};

/// The message of a call ended at the drain bound.
pub const CUT_AT_SHUTDOWN: &str = "provider shut down before the stream ended";

/// The server's cut at its drain bound, shared by every call of its connections.
#[derive(Debug, Default)]
pub(crate) struct ShutdownCut {
    token: CancellationToken,
    /// Set before the token is cancelled: read by a call's bounds without the token's lock.
    done: AtomicBool,
    calls: AtomicUsize,
}

impl ShutdownCut {
    /// Ends every call still open, with `UNAVAILABLE` ([`CUT_AT_SHUTDOWN`]).
    pub(crate) fn cut(&self) {
        self.done.store(true, Ordering::Release);
        self.token.cancel();
    }

    /// Calls ended by [`ShutdownCut::cut`] so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Wraps a connection's service so that every call is ended at its deadline or at the
/// server's drain bound, with a status that says which.
#[derive(Clone, Debug)]
pub(crate) struct CallBounds<S> {
    inner: S,
    cut: Arc<ShutdownCut>,
}

impl<S> CallBounds<S> {
    pub(crate) fn new(inner: S, cut: Arc<ShutdownCut>) -> Self {
        Self { inner, cut }
    }
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for CallBounds<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = Response<ServedBody<B>>;
    type Error = S::Error;
    type Future = BoundedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        if !not_grpc::is_grpc(request.headers()) {
            return BoundedFuture::Refused {
                refusal: Some(Refusal::NotGrpc),
            };
        }
        let limit = match read_grpc_timeout(request.headers()) {
            Err(malformed) => {
                let status = Status::internal(malformed.to_string());
                return BoundedFuture::Refused {
                    refusal: Some(Refusal::Status(status)),
                };
            }
            // A caller (or a hop before it) with no time left: nothing it could use would
            // come back in time, so the handler does not run.
            Ok(Some(limit)) if limit.is_zero() => {
                let status = Status::deadline_exceeded(NO_TIME_LEFT);
                return BoundedFuture::Refused {
                    refusal: Some(Refusal::Status(status)),
                };
            }
            Ok(limit) => limit,
        };
        let deadline = limit.map(|limit| Instant::now() + limit);
        let context = served_context(deadline, request.headers());
        // For the filters, which run before the handler's future (the trace filter
        // records the span's ids, the access log the trace id).
        request.extensions_mut().insert(context.clone());
        BoundedFuture::Running {
            // The handler's reference calls read the deadline from here (call_context.rs
            // in lossless-rpc-core).
            inner: context.scope(self.inner.call(request)),
            bounds: Some(Bounds::new(limit.zip(deadline), self.cut.clone())),
        }
    }
}

/// The context a served call's handler runs in: its `deadline`, and its span in the
/// caller's trace (a child of the caller's `traceparent`, or the first of a new trace).
fn served_context(deadline: Option<Instant>, headers: &http::HeaderMap) -> CallContext {
    let context = CallContext::new().with_trace(TraceContext::continued_from(headers));
    match deadline {
        Some(deadline) => context.with_deadline(deadline),
        None => context,
    }
}

/// What ends a call early: its deadline, and the server's cut at the drain bound.
pub(crate) struct Bounds {
    deadline: Option<(Pin<Box<Sleep>>, Duration)>,
    cut: Arc<ShutdownCut>,
    /// Created the first time the call waits: a call that completes at once never
    /// allocates it.
    cut_wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// The waker both bounds are registered with. A stream's body is polled again at
    /// each message, mostly by the same task: then each bound is checked (an atomic
    /// load) rather than polled again (~250 instructions a poll, callgrind, ping-pong).
    registered: Option<Waker>,
}

impl Bounds {
    /// Bounds ending at `deadline`, reported as `limit` (the caller's `grpc-timeout`).
    fn new(deadline: Option<(Duration, Instant)>, cut: Arc<ShutdownCut>) -> Self {
        Self {
            deadline: deadline
                .map(|(limit, deadline)| (Box::pin(tokio::time::sleep_until(deadline)), limit)),
            cut,
            cut_wait: None,
            registered: None,
        }
    }

    /// Whether a bound passed, read without polling (the bounds are registered with the
    /// waker that polls now).
    fn passed(&self) -> Option<Status> {
        match &self.deadline {
            Some((sleep, limit)) if sleep.is_elapsed() => Some(deadline_exceeded(*limit)),
            _ => self
                .cut
                .done
                .load(Ordering::Acquire)
                .then(|| self.cut_status()),
        }
    }

    /// Counts a call ended by the cut; its status.
    fn cut_status(&self) -> Status {
        self.cut.calls.fetch_add(1, Ordering::Relaxed);
        Status::unavailable(CUT_AT_SHUTDOWN)
    }
}

impl BodyBound for Bounds {
    /// The status to end the call with, once a bound has passed (and registers for a
    /// wake-up until then).
    fn poll_passed(&mut self, cx: &mut Context<'_>) -> Poll<Status> {
        if self
            .registered
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()))
        {
            return self.passed().map_or(Poll::Pending, Poll::Ready);
        }
        let deadline_passed = match &mut self.deadline {
            Some((sleep, limit)) => sleep.as_mut().poll(cx).is_ready().then_some(*limit),
            None => None,
        };
        if let Some(limit) = deadline_passed {
            return Poll::Ready(deadline_exceeded(limit));
        }
        let cut_wait = self.cut_wait.get_or_insert_with(|| {
            // Waits on the token the server shares, through the `Arc` this call already
            // holds: cloning the token itself would take its lock twice per call.
            let cut = self.cut.clone();
            Box::pin(async move { cut.token.cancelled().await })
        });
        if cut_wait.as_mut().poll(cx).is_ready() {
            return Poll::Ready(self.cut_status());
        }
        self.registered = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Why a call is answered without running.
pub(crate) enum Refusal {
    /// Not gRPC (its `content-type`): HTTP 415.
    NotGrpc,
    /// A malformed `grpc-timeout`: this status.
    Status(Status),
}

pin_project! {
    /// Future of [`CallBounds`].
    #[project = Projection]
    pub(crate) enum BoundedFuture<F> {
        /// The request was answered without running.
        Refused { refusal: Option<Refusal> },
        /// The handler runs until it answers or a bound passes.
        Running {
            #[pin]
            inner: TaskLocalFuture<CallContext, F>,
            bounds: Option<Bounds>,
        },
    }
}

impl<F, B, E> Future for BoundedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response<ServedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Refused { refusal } => Poll::Ready(Ok(match refusal.take() {
                Some(Refusal::NotGrpc) => not_grpc::unsupported(BoundedBody::ended()),
                Some(Refusal::Status(status)) => trailers_only(status),
                None => trailers_only(Status::internal("polled twice")),
            })),
            Projection::Running { inner, bounds } => {
                if let Poll::Ready(result) = inner.poll(cx) {
                    let bounds = bounds.take();
                    return Poll::Ready(result.map(|mut response| {
                        // A status in the headers is a trailers-only answer's, whose
                        // body has ended already; any other's status is in its trailers.
                        if response.body().is_end_stream() {
                            message_size_status::correct(response.headers_mut());
                        }
                        response.map(|body| BoundedBody::new(corrected(body), bounds))
                    }));
                }
                let Some(active) = bounds.as_mut() else {
                    return Poll::Pending;
                };
                // The handler's future is dropped with this one: the call is cancelled.
                let status = std::task::ready!(active.poll_passed(cx));
                *bounds = None;
                Poll::Ready(Ok(trailers_only(status)))
            }
        }
    }
}

/// What a served call's response body is: the handler's, with message-size statuses in
/// its trailers corrected and its errors boxed, cut at the call's bounds.
pub(crate) type ServedBody<B> = BoundedBody<Corrected<B>, Bounds>;

pin_project! {
    /// The handler's body, its trailers corrected (see `message_size_status.rs`) and its
    /// error boxed: one wrapper, not a frame map inside an error map (each a poll and an
    /// indirect call per frame).
    pub(crate) struct Corrected<B> {
        #[pin]
        inner: B,
    }
}

fn corrected<B>(body: B) -> Corrected<B> {
    Corrected { inner: body }
}

impl<B> Body for Corrected<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut frame = match std::task::ready!(self.project().inner.poll_frame(cx)) {
            None => return Poll::Ready(None),
            Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
            Some(Ok(frame)) => frame,
        };
        if let Some(trailers) = frame.trailers_mut() {
            message_size_status::correct(trailers);
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A response with no message, whose headers carry `status` (gRPC's "trailers-only").
fn trailers_only<B>(status: Status) -> Response<ServedBody<B>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    status.into_http::<()>().map(|()| BoundedBody::ended())
}

#[cfg(test)]
mod tests;
