//! What a server knows of the peer at the other end of one connection, and how a
//! refusal reaches that peer.
//!
//! Two kinds of callers reach a provider. rpc's consumers send [`CONSUMER`] on every
//! call: they read the closing mark and re-send a "closing, not executed" refusal to
//! another instance. Every other client (grpcio, grpc-go, tonic's own channels, grpcurl)
//! knows nothing of either, so it is told in HTTP/2's own terms instead:
//!
//! - once the server was told to send plain clients that call away
//!   (`ServerHandle::goaway_plain_clients_that_call`: the lifecycle does so when its
//!   shutdown has waited one offline window for consumers to move away), a call of such
//!   a client shows that neither the closing mark nor the registry moved it: its
//!   connection starts its
//!   graceful close (the first GOAWAY, see `connection.rs`) at once, and since the
//!   listener is closed by then, the client dials another instance. A client that did
//!   move away by other means (e.g. it watches the health service, which says
//!   NOT_SERVING from the shutdown's start) sends nothing more, and its connection is
//!   left alone until `goaway_plain_clients`, when every connection that never carried
//!   an rpc consumer's call gets GOAWAY (rpc consumers' connections get theirs at the
//!   server's shutdown, as they always did);
//! - a request it sends once refusals have begun is refused with `REFUSED_STREAM`, not
//!   with a gRPC status: RFC 9113 §8.7 makes that the proof that the request was not
//!   processed, and gRPC clients retry such a stream by themselves ("transparent
//!   retry", gRPC A6), where a status would reach the caller as a failed call.
//!
//! The calls in flight on the connection are counted too, until their response is
//! handed over to HTTP/2 in full: a connection with none is idle, and closing it loses
//! nothing. Each call also marks the connection as used, so its idle timeout can tell
//! a connection that stayed idle from one whose calls came and went in between.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower::Service;

use tokio_util::sync::CancellationToken;

use rpc_core::BoxError;
use rpc_core::metadata::{CONSUMER, ClosingRefusal, is_health_check};
use rpc_core::{BodyEnd, BodyGuard, GuardedBody, InflightCounter, InflightGuard};

/// One connection's peer, as its requests show it.
#[derive(Debug, Default)]
pub(crate) struct Peer {
    /// Set by the first request that carried [`CONSUMER`].
    reads_closing_mark: AtomicBool,
    /// Cancelled by a call of a plain client once plain clients that call are sent
    /// away (`goaway_plain_clients_that_call`): the connection
    /// must start its graceful close.
    must_go: CancellationToken,
    /// Calls in flight on the connection.
    calls: InflightCounter,
    /// Set by every call; cleared by the idle timer when it starts a period (see
    /// `connection_timeouts.rs`). A store per call, no read-modify-write.
    called: AtomicBool,
    /// Cancelled by the connection's first request (any request, a health check too).
    first_request: CancellationToken,
    /// Set with `first_request`, read by every request: a token's state is behind its
    /// lock, a flag is one load.
    has_requested: AtomicBool,
}

impl Peer {
    /// Whether a request of this connection came from an rpc consumer.
    pub(crate) fn reads_closing_mark(&self) -> bool {
        self.reads_closing_mark.load(Ordering::Relaxed)
    }

    /// Resolves once a call showed that this peer is not moved by the closing mark.
    pub(crate) async fn must_go(&self) {
        self.must_go.cancelled().await;
    }

    /// Resolves once no call is in flight on the connection (at once if none is).
    pub(crate) async fn idle(&self) {
        self.calls.wait_idle().await;
    }

    /// Calls in flight on the connection now.
    pub(crate) fn calls_in_flight(&self) -> usize {
        self.calls.current()
    }

    /// Clears the mark of a call, before a period of the idle timer.
    pub(crate) fn forget_calls(&self) {
        self.called.store(false, Ordering::Relaxed);
    }

    /// Whether a call began since [`Peer::forget_calls`].
    pub(crate) fn called(&self) -> bool {
        self.called.load(Ordering::Relaxed)
    }

    /// Counts a call on the connection until the guard is dropped (for tests of the
    /// parts that read the count).
    #[cfg(test)]
    pub(crate) fn call_for_test(&self) -> InflightGuard {
        self.called.store(true, Ordering::Relaxed);
        self.calls.acquire()
    }

    /// Whether the peer has sent a request on this connection yet.
    pub(crate) fn has_requested(&self) -> bool {
        self.has_requested.load(Ordering::Acquire)
    }

    /// Resolves once the peer has sent its first request (at once if it has).
    pub(crate) async fn requested(&self) {
        self.first_request.cancelled().await;
    }
}

/// Wraps one connection's service: counts its calls, tells the connection to go when
/// a plain client keeps calling once plain clients that call are sent away, and turns
/// a "closing, not
/// executed" refusal of a request that did not come from an rpc consumer into
/// `REFUSED_STREAM`.
#[derive(Clone, Debug)]
pub(crate) struct PeerService<S> {
    inner: S,
    peer: Arc<Peer>,
    /// The server's flag that plain clients that call are sent away; `None` for a
    /// connection accepted
    /// after it (see `PeerService::new`). A flag, not a token: every request reads it,
    /// and a token's state is behind its lock.
    plain_clients_go: Option<Arc<AtomicBool>>,
    /// The server's count of streams refused with `REFUSED_STREAM`.
    refused: Arc<AtomicUsize>,
}

impl<S> PeerService<S> {
    /// Wraps `inner` for the connection of `peer`; `plain_clients_go` is set when plain
    /// clients that call are sent away, `refused` counts the server's refused streams.
    ///
    /// A connection accepted after that has no `plain_clients_go`: it got past
    /// the hold (`socket.rs`) by calling without waiting for the server's SETTINGS, so
    /// its client is not one of gRPC's own, and a GOAWAY would only make it dial this
    /// address again (tonic's channel does). It is served, and refused once requests
    /// are refused.
    pub(crate) fn new(
        inner: S,
        peer: Arc<Peer>,
        plain_clients_go: Option<Arc<AtomicBool>>,
        refused: Arc<AtomicUsize>,
    ) -> Self {
        Self {
            inner,
            peer,
            plain_clients_go,
            refused,
        }
    }
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for PeerService<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<PeerBody<B>>;
    type Error = BoxError;
    type Future = PeerFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        if !self.peer.has_requested() {
            self.peer.has_requested.store(true, Ordering::Release);
            self.peer.first_request.cancel();
        }
        // A request carries a handful of headers: a scan, not a hashed lookup.
        let from_consumer = rpc_core::metadata::header(request.headers(), &CONSUMER).is_some();
        if from_consumer && !self.peer.reads_closing_mark() {
            self.peer.reads_closing_mark.store(true, Ordering::Relaxed);
        }
        // A health check is no call: a probe must not send its connection away.
        let is_call = !is_health_check(request.uri().path());
        let plain_clients_go = self
            .plain_clients_go
            .as_deref()
            .is_some_and(|go| go.load(Ordering::Acquire));
        if !from_consumer && is_call && plain_clients_go {
            self.peer.must_go.cancel();
        }
        // Relaxed: an idle timer that misses a call beginning as its period ends sends
        // GOAWAY to a connection with that one call, which h2 still serves to its end.
        self.peer.called.store(true, Ordering::Relaxed);
        PeerFuture {
            call: Some(self.peer.calls.acquire()),
            from_consumer,
            refused: self.refused.clone(),
            inner: self.inner.call(request),
        }
    }
}

pin_project! {
    /// Future of [`PeerService`].
    pub(crate) struct PeerFuture<F> {
        #[pin]
        inner: F,
        call: Option<InflightGuard>,
        from_consumer: bool,
        refused: Arc<AtomicUsize>,
    }
}

impl<F, B, E> Future for PeerFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<PeerBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.inner.poll(cx)).map_err(Into::into)?;
        let call = this.call.take();
        // Only a closing refusal: an overload refusal stays a RESOURCE_EXHAUSTED status,
        // as a plain client should back off, not re-send at once as it may a refused
        // stream.
        let closing_refusal = response.extensions().get::<ClosingRefusal>().is_some();
        if !*this.from_consumer && closing_refusal {
            this.refused.fetch_add(1, Ordering::Relaxed);
            // hyper resets the stream with the h2 reason it finds in the error's
            // sources. The call stays counted until hyper drops the error, which it
            // does after queueing the reset: the connection is not idle before.
            return Poll::Ready(Err(Box::new(RefusedStream {
                reason: h2::Error::from(h2::Reason::REFUSED_STREAM),
                _call: call,
            })));
        }
        Poll::Ready(Ok(response.map(|inner| {
            GuardedBody::new(inner, CallOnConnection { _call: call })
        })))
    }
}

/// A request refused before it ran, for a peer that reads no closing mark: hyper
/// answers it with `RST_STREAM(REFUSED_STREAM)`.
#[derive(Debug)]
struct RefusedStream {
    reason: h2::Error,
    _call: Option<InflightGuard>,
}

impl std::fmt::Display for RefusedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused: the provider is shutting down (the request was not processed)")
    }
}

impl std::error::Error for RefusedStream {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.reason)
    }
}

/// A call counted on its connection until hyper drops its response body, which it does
/// once the last frame was handed to HTTP/2 — later than the end of the body, so the
/// connection does not count as idle while a call's trailers are still on their way to
/// the socket. (A call without a body to hold it, e.g. a refused stream, holds its
/// guard in the error hyper drops after queueing the reset.)
#[derive(Debug)]
pub(crate) struct CallOnConnection {
    _call: Option<InflightGuard>,
}

impl BodyGuard for CallOnConnection {
    fn body_ended(self, _end: BodyEnd<'_>) -> Option<Self> {
        Some(self)
    }
}

/// The response body of a call served on a connection: counted until dropped.
pub(crate) type PeerBody<B> = GuardedBody<B, CallOnConnection>;

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::Empty;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use rpc_core::metadata::{CONSUMER_VALUE, NOT_EXECUTED, NOT_EXECUTED_CLOSING};

    /// A handler that refuses every request as a closing provider does.
    fn refusing() -> impl Service<
        Request<()>,
        Response = Response<Empty<Bytes>>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<Empty<Bytes>>, Infallible>>,
    > + Clone {
        service_fn(|_request: Request<()>| async {
            let mut response = Response::new(Empty::new());
            response
                .headers_mut()
                .insert(NOT_EXECUTED, NOT_EXECUTED_CLOSING);
            response.extensions_mut().insert(ClosingRefusal);
            Ok::<_, Infallible>(response)
        })
    }

    fn request(from_consumer: bool) -> Request<()> {
        let mut request = Request::builder().uri("/echo.Echo/Echo").body(()).unwrap();
        if from_consumer {
            request.headers_mut().insert(CONSUMER, CONSUMER_VALUE);
        }
        request
    }

    #[tokio::test]
    async fn a_refusal_reaches_a_consumer_as_a_status_and_others_as_refused_stream() {
        let peer = Arc::new(Peer::default());
        let refused = Arc::new(AtomicUsize::new(0));
        let service = PeerService::new(refusing(), peer.clone(), None, refused.clone());

        let Err(error) = service.clone().oneshot(request(false)).await else {
            panic!("a plain client's request is refused with an error, not answered");
        };
        let reason = error
            .source()
            .and_then(|source| source.downcast_ref::<h2::Error>())
            .and_then(h2::Error::reason);
        assert_eq!(reason, Some(h2::Reason::REFUSED_STREAM));
        assert_eq!(refused.load(Ordering::Relaxed), 1);
        assert!(!peer.reads_closing_mark());

        let response = service.oneshot(request(true)).await.unwrap();
        assert!(response.headers().contains_key(&NOT_EXECUTED));
        assert_eq!(refused.load(Ordering::Relaxed), 1);
        assert!(peer.reads_closing_mark());
    }

    #[tokio::test]
    async fn a_plain_clients_call_sends_its_connection_away_once_plain_clients_go() {
        let peer = Arc::new(Peer::default());
        let plain_clients_go = Arc::new(AtomicBool::new(false));
        let answering = service_fn(|_request: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        });
        let service = PeerService::new(
            answering,
            peer.clone(),
            Some(plain_clients_go.clone()),
            Arc::default(),
        );
        service.clone().oneshot(request(false)).await.unwrap();
        assert!(
            !peer.must_go.is_cancelled(),
            "before plain clients are sent away nothing moves"
        );
        plain_clients_go.store(true, Ordering::Release);
        service.clone().oneshot(request(true)).await.unwrap();
        let probe = Request::builder()
            .uri("/grpc.health.v1.Health/Check")
            .body(())
            .unwrap();
        service.clone().oneshot(probe).await.unwrap();
        assert!(
            !peer.must_go.is_cancelled(),
            "an rpc consumer's call and a health check do not send it away"
        );
        service.oneshot(request(false)).await.unwrap();
        assert!(peer.must_go.is_cancelled());
    }

    #[tokio::test]
    async fn a_call_counts_until_its_body_is_dropped() {
        let peer = Arc::new(Peer::default());
        let answering = service_fn(|_request: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        });
        let service = PeerService::new(answering, peer.clone(), None, Arc::default());
        let response = service.oneshot(request(true)).await.unwrap();
        assert_eq!(peer.calls.current(), 1, "the body is still held");
        drop(response);
        assert_eq!(peer.calls.current(), 0);
        peer.idle().await;
    }
}
