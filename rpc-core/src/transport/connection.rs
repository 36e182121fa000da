//! One accepted HTTP/2 connection: serve it until it closes, or until the server's
//! shutdown tells it to send GOAWAY; then until its last call ends — or, with nothing
//! in flight, without waiting for a peer that does not finish the close (or at once
//! when told to).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpConnectInfo;
use tower::{Service, ServiceExt};

use super::call_bounds::{CallBounds, ShutdownCut};
use super::peer::{Peer, PeerService};
use crate::registry::BoxError;

/// How long a connection with no call in flight waits, once the server's shutdown has
/// begun, for its peer to answer the PING sent with its first GOAWAY before it is closed
/// without that answer. The answer proves that no request crossed the GOAWAY (RFC 9113
/// §6.8: "at least one round-trip time"); a peer that has not answered in 100 ms — far
/// more than a round trip between a provider and its clients — is mute or gone, and
/// holding the exit for it would only delay the process. Connections told to close at
/// shutdown step 2 have had the whole offline window for it already.
pub(crate) const PING_ANSWER_WAIT: Duration = Duration::from_millis(100);

/// Signals and tallies shared by a server and all of its connections.
#[derive(Debug, Default)]
pub(crate) struct ConnectionSignals {
    /// Cancelled when shutdown step 2 begins: from then on, a call of a plain client
    /// (not an rpc consumer) makes its connection start its graceful close.
    pub(crate) plain_clients_go: CancellationToken,
    /// Cancelled when every connection that never carried an rpc consumer's call must
    /// start its graceful close: shutdown step 3.
    pub(crate) goaway_plain: CancellationToken,
    /// Cancelled when every connection must start its graceful close: step 6.
    pub(crate) goaway: CancellationToken,
    /// Cancelled when connections whose graceful close has begun may be closed as soon
    /// as they carry no call (after [`PING_ANSWER_WAIT`]), whatever their peer does.
    pub(crate) close_idle: CancellationToken,
    /// Cancelled when connections must close now, whatever they carry.
    pub(crate) force: CancellationToken,
    /// Connections open now.
    pub(crate) open: AtomicUsize,
    /// Connections that completed a graceful close after GOAWAY.
    pub(crate) closed_gracefully: AtomicUsize,
    /// Connections closed by us with no call in flight, without waiting for the peer.
    pub(crate) closed_idle: AtomicUsize,
    /// Connections closed by force (deadline or abort) while the peer still had them.
    pub(crate) forced: AtomicUsize,
    /// Connections closed without GOAWAY because the peer never sent a byte.
    pub(crate) unused: AtomicUsize,
    /// Cut at the drain bound: calls still open end with `UNAVAILABLE`.
    pub(crate) cut: Arc<ShutdownCut>,
    /// Graceful closes begun: the first GOAWAY (with its PING) sent on a connection.
    pub(crate) goaway_sent: AtomicU64,
    /// Requests refused with `REFUSED_STREAM` (see `peer.rs`).
    pub(crate) refused: Arc<AtomicUsize>,
}

/// Serves `stream` with `service` until the connection ends or the signals end it.
pub(crate) async fn serve<S, B>(
    stream: TcpStream,
    service: S,
    builder: http2::Builder<TokioExecutor>,
    signals: Arc<ConnectionSignals>,
) where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    signals.open.fetch_add(1, Ordering::Relaxed);
    // Handlers can ask tonic's `Request::local_addr()` / `remote_addr()`, as with
    // tonic's own server.
    let info = TcpConnectInfo {
        local_addr: stream.local_addr().ok(),
        remote_addr: stream.peer_addr().ok(),
    };
    let service = service.map_request(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(info.clone());
        request
    });
    let peer = Arc::new(Peer::default());
    let service = PeerService::new(
        CallBounds::new(service, signals.cut.clone()),
        peer.clone(),
        signals.plain_clients_go.clone(),
        signals.refused.clone(),
    );
    let heard_from_peer = Arc::new(AtomicBool::new(false));
    let io = TokioIo::new(FirstRead::new(stream, heard_from_peer.clone()));
    let conn = builder.serve_connection(io, TowerToHyperService::new(service));
    tokio::pin!(conn);

    // 1. Serve until the connection ends by itself, or the server asks this peer to go.
    let outcome = tokio::select! {
        biased;
        _ = signals.force.cancelled() => Some(&signals.forced),
        _ = goaway_asked(&signals, &peer) => None,
        result = conn.as_mut() => {
            log_end(result);
            Some(&signals.closed_gracefully)
        }
    };
    let tally = match outcome {
        Some(tally) => tally,
        // A peer that never sent a byte has not begun the HTTP/2 handshake: there is
        // no stream to protect, so close it ourselves rather than wait on it.
        None if !heard_from_peer.load(Ordering::Acquire) => &signals.unused,
        None => {
            // 2. h2 sends GOAWAY(last id = 2^31-1) with a PING, and the final GOAWAY
            //    with the real last stream id once the PING is answered, then closes
            //    when the last stream ends: a request crossing the first GOAWAY is
            //    still served (or refused as not executed), never silently lost.
            conn.as_mut().graceful_shutdown();
            signals.goaway_sent.fetch_add(1, Ordering::Relaxed);
            let goaway_at = Instant::now();
            tokio::select! {
                biased;
                _ = signals.force.cancelled() => &signals.forced,
                result = conn.as_mut() => {
                    log_end(result);
                    &signals.closed_gracefully
                }
                // A peer that does not answer the PING, or ignores the GOAWAY and
                // keeps the socket open, would hold the connection for ever: once
                // nothing is in flight on it, nothing is lost by closing it.
                _ = idle_after_goaway(&signals, &peer, goaway_at) => &signals.closed_idle,
            }
        }
    };
    tally.fetch_add(1, Ordering::Relaxed);
    signals.open.fetch_sub(1, Ordering::Relaxed);
}

/// Resolves when this connection must start its graceful close: from shutdown step 2
/// on when its plain client still calls (the closing mark did not move it; see
/// `peer.rs`), from step 3 on when it never carried an rpc consumer's call, and at the
/// server's shutdown (step 6) in any case — when rpc consumers, who stopped choosing
/// this instance at its closing mark, close theirs as they always did.
async fn goaway_asked(signals: &ConnectionSignals, peer: &Peer) {
    let plain = async {
        signals.goaway_plain.cancelled().await;
        if peer.reads_closing_mark() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = signals.goaway.cancelled() => {}
        _ = peer.must_go() => {}
        _ = plain => {}
    }
}

/// Resolves once the server's shutdown allows idle connections to close, the peer has
/// had [`PING_ANSWER_WAIT`] since `goaway_at` to answer, and no call is in flight.
async fn idle_after_goaway(signals: &ConnectionSignals, peer: &Peer, goaway_at: Instant) {
    signals.close_idle.cancelled().await;
    tokio::time::sleep_until(goaway_at + PING_ANSWER_WAIT).await;
    peer.idle().await;
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

pin_project! {
    /// A socket that notes whether the peer ever sent a byte.
    struct FirstRead {
        #[pin]
        stream: TcpStream,
        seen: bool,
        flag: Arc<AtomicBool>,
    }
}

impl FirstRead {
    fn new(stream: TcpStream, flag: Arc<AtomicBool>) -> Self {
        Self {
            stream,
            seen: false,
            flag,
        }
    }
}

impl AsyncRead for FirstRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let poll = this.stream.poll_read(cx, buf);
        if !*this.seen && buf.filled().len() > before {
            *this.seen = true;
            this.flag.store(true, Ordering::Release);
        }
        poll
    }
}

impl AsyncWrite for FirstRead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
