//! One accepted HTTP/2 connection: serve it until it closes, or until the server's
//! shutdown tells it to send GOAWAY (or to close at once).

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
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpConnectInfo;
use tower::{Service, ServiceExt};

use super::call_bounds::{CallBounds, ShutdownCut};
use crate::registry::BoxError;

/// Signals and tallies shared by a server and all of its connections.
#[derive(Debug, Default)]
pub(crate) struct ConnectionSignals {
    /// Cancelled when connections must start a graceful close (GOAWAY + PING).
    pub(crate) goaway: CancellationToken,
    /// Cancelled when connections must close now, whatever they carry.
    pub(crate) force: CancellationToken,
    /// Connections open now.
    pub(crate) open: AtomicUsize,
    /// Connections that completed a graceful close after GOAWAY.
    pub(crate) closed_gracefully: AtomicUsize,
    /// Connections closed by force (deadline or abort) while the peer still had them.
    pub(crate) forced: AtomicUsize,
    /// Connections closed without GOAWAY because the peer never sent a byte.
    pub(crate) unused: AtomicUsize,
    /// Cut at the drain bound: calls still open end with `UNAVAILABLE`.
    pub(crate) cut: Arc<ShutdownCut>,
    /// Graceful closes begun: the first GOAWAY (with its PING) sent on a connection.
    pub(crate) goaway_sent: AtomicU64,
}

/// A TLS handshake to make before HTTP/2: the acceptor in force when the connection was
/// accepted, and how long the peer has to finish it.
pub(crate) struct Handshake {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) timeout: Duration,
}

/// Serves `stream` with `service` (after the TLS handshake, if any) until the connection
/// ends or the signals end it.
pub(crate) async fn serve<S, B>(
    stream: TcpStream,
    tls: Option<Handshake>,
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
    let service = CallBounds::new(service, signals.cut.clone());
    let tally = match tls {
        None => serve_http2(stream, service, &builder, &signals).await,
        Some(handshake) => match handshake_unless_closing(stream, handshake, &signals).await {
            Ok(stream) => serve_http2(stream, service, &builder, &signals).await,
            Err(tally) => tally,
        },
    };
    tally.fetch_add(1, Ordering::Relaxed);
    signals.open.fetch_sub(1, Ordering::Relaxed);
}

/// The TLS handshake, bounded by its timeout and given up when the server closes: a
/// connection still in its handshake carries no stream, so nothing is lost, and it is
/// tallied as unused. A failed handshake (a client that does not trust us, or has no
/// certificate a mutual-TLS provider accepts) ends the connection, tallied as closed.
async fn handshake_unless_closing(
    stream: TcpStream,
    handshake: Handshake,
    signals: &ConnectionSignals,
) -> Result<TlsStream<TcpStream>, &AtomicUsize> {
    let bounded = tokio::time::timeout(handshake.timeout, handshake.acceptor.accept(stream));
    tokio::select! {
        biased;
        _ = signals.force.cancelled() => Err(&signals.unused),
        _ = signals.goaway.cancelled() => Err(&signals.unused),
        result = bounded => match result {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(error)) => {
                tracing::debug!(%error, "TLS handshake failed");
                Err(&signals.closed_gracefully)
            }
            Err(_elapsed) => {
                tracing::debug!(timeout = ?handshake.timeout, "TLS handshake not finished in time");
                Err(&signals.closed_gracefully)
            }
        },
    }
}

/// Serves HTTP/2 on `io` until the connection ends or the signals end it; the tally the
/// connection's end belongs to.
async fn serve_http2<'a, IO, S, B>(
    io: IO,
    service: S,
    builder: &http2::Builder<TokioExecutor>,
    signals: &'a ConnectionSignals,
) -> &'a AtomicUsize
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let heard_from_peer = Arc::new(AtomicBool::new(false));
    let io = TokioIo::new(FirstRead::new(io, heard_from_peer.clone()));
    let conn = builder.serve_connection(io, TowerToHyperService::new(service));
    tokio::pin!(conn);

    let outcome = tokio::select! {
        biased;
        _ = signals.force.cancelled() => Some(&signals.forced),
        _ = signals.goaway.cancelled() => None,
        result = conn.as_mut() => {
            log_end(result);
            Some(&signals.closed_gracefully)
        }
    };
    match outcome {
        Some(tally) => tally,
        // A peer that never sent a byte has not begun the HTTP/2 handshake: there is
        // no stream to protect, so close it ourselves rather than wait on it.
        None if !heard_from_peer.load(Ordering::Acquire) => &signals.unused,
        None => {
            // h2 sends GOAWAY(last id = 2^31-1) with a PING, and the final GOAWAY with
            // the real last stream id once the PING is acknowledged: a request crossing
            // the first GOAWAY is still served (and our reject filter answers it with
            // "closing, not executed"), never silently lost.
            conn.as_mut().graceful_shutdown();
            signals.goaway_sent.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                biased;
                _ = signals.force.cancelled() => &signals.forced,
                result = conn.as_mut() => {
                    log_end(result);
                    &signals.closed_gracefully
                }
            }
        }
    }
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

pin_project! {
    /// A socket (after TLS, if any) that notes whether the peer ever sent a byte of
    /// HTTP/2.
    struct FirstRead<T> {
        #[pin]
        stream: T,
        seen: bool,
        flag: Arc<AtomicBool>,
    }
}

impl<T> FirstRead<T> {
    fn new(stream: T, flag: Arc<AtomicBool>) -> Self {
        Self {
            stream,
            seen: false,
            flag,
        }
    }
}

impl<T: AsyncRead> AsyncRead for FirstRead<T> {
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

impl<T: AsyncWrite> AsyncWrite for FirstRead<T> {
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
