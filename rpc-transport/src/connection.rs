//! One accepted HTTP/2 connection: serve it until it closes, or until the server's
//! shutdown tells it to send GOAWAY; then until its last call ends — or, with nothing
//! in flight, without waiting for a peer that does not finish the close (or at once
//! when told to). A connection also ends by itself: at once when its peer has not sent
//! the HTTP/2 preface in time, gracefully when it carried no call for the idle timeout,
//! and either way when the server's table sheds it to make room.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::TcpConnectInfo;
use tower::{Service, ServiceExt};

use super::call_bounds::CallBounds;
use super::connection_service::ConnectionService;
use super::connection_signals::{ConnectionSignals, PING_ANSWER_WAIT};
use super::connection_signals::{Stop, asked_to_stop, idle_after_goaway};
use super::connection_table::{Admitted, Tracked};
use super::connection_timeouts::{Limits, preface_late};
use super::linger::{LINGER, Lent, linger};
use super::peer::PeerService;
use super::socket::{PeerSocket, read_until_request};
use super::woken::PolledWhenWoken;
use rpc_core::BoxError;

/// How long after its accept a connection accepted before a hot upgrade's hand-over
/// waits, at its graceful close, for a first request (`Connection::serve_http2`): long
/// against a client's dial-to-first-call (tens of ms on a contended CPU), short against
/// the drain's bound (`step_timeout`, 3 s). A peer silent longer (a dial given up,
/// accepted when a paused host resumed: simulator seed 4697) is not waited for.
pub(crate) const FIRST_REQUEST_WAIT: Duration = Duration::from_secs(1);

/// A TLS handshake to make before HTTP/2: the acceptor in force when the connection was
/// accepted, and how long the peer has to finish it.
pub(crate) struct Handshake {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) timeout: Duration,
}

/// Serves `stream` (with `info`, the addresses its handlers can ask for) with `service`
/// (after the TLS handshake, if any) until the connection ends, the signals end it, or
/// its own `limits` or its place in the server's table (`admitted`, given up once the
/// socket is closed) do.
pub(crate) async fn serve<IO, S, B>(
    (stream, info): (IO, TcpConnectInfo),
    tls: Option<Handshake>,
    service: S,
    builder: http2::Builder<TokioExecutor>,
    signals: Arc<ConnectionSignals>,
    admitted: Admitted,
    limits: Limits,
) where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    signals.open.fetch_add(1, Ordering::Relaxed);
    // Accepted during a shutdown: held back from HTTP/2 until its peer sends a request
    // (see `socket.rs`); closed at the server's shutdown if it never does.
    let accepted_in_shutdown = signals.plain_clients_go.load(Ordering::Acquire);
    let service = service.map_request(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(info.clone());
        request
    });
    let tracked = admitted.tracked().clone();
    let service = PeerService::new(
        CallBounds::new(service, signals.cut.clone()),
        tracked.peer.clone(),
        (!accepted_in_shutdown).then(|| signals.plain_clients_go.clone()),
        signals.refused.clone(),
    );
    let connection = Connection {
        tracked: &tracked,
        accepted: Instant::now(),
        limits,
        accepted_in_shutdown,
        builder,
        signals: &signals,
    };
    let tally = match tls {
        None => connection.serve_until_closed(stream, service).await,
        // Boxed, so that a plain connection's task does not carry a TLS session's room:
        // an async fn's state is as large as its largest branch.
        Some(handshake) => {
            Box::pin(async {
                match connection.handshake(stream, handshake).await {
                    Ok(stream) => connection.serve_until_closed(stream, service).await,
                    Err(tally) => tally,
                }
            })
            .await
        }
    };
    tally.fetch_add(1, Ordering::Relaxed);
    signals.open.fetch_sub(1, Ordering::Relaxed);
    // The socket is closed by now: its descriptor is free when the table hears of it.
    drop(admitted);
}

/// One accepted connection: what it knows of its peer, its limits, and the server's
/// signals.
struct Connection<'a> {
    tracked: &'a Tracked,
    /// When it was accepted (a first request is awaited until FIRST_REQUEST_WAIT after).
    accepted: Instant,
    limits: Limits,
    accepted_in_shutdown: bool,
    builder: http2::Builder<TokioExecutor>,
    signals: &'a ConnectionSignals,
}

impl<'a> Connection<'a> {
    /// The TLS handshake, bounded by its timeout and by the preface deadline, and given
    /// up when the server closes or sheds the connection: a connection still in its
    /// handshake carries no stream, so nothing is lost, and it is tallied as unused. A
    /// failed handshake (a client that does not trust us, or has no certificate a
    /// mutual-TLS provider accepts) ends the connection, tallied as closed.
    async fn handshake<IO>(
        &self,
        stream: IO,
        handshake: Handshake,
    ) -> Result<TlsStream<IO>, &'a AtomicUsize>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let signals = self.signals;
        let bounded = tokio::time::timeout(handshake.timeout, handshake.acceptor.accept(stream));
        tokio::select! {
            biased;
            _ = signals.force.cancelled() => Err(&signals.unused),
            _ = signals.goaway.cancelled() => Err(&signals.unused),
            _ = self.tracked.shed() => Err(&signals.unused),
            _ = tokio::time::sleep_until(self.limits.preface_deadline) => Err(self.preface_late()),
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

    /// Counts a preface timeout; the tally its connection's end counts in (it began no
    /// HTTP/2: unused).
    fn preface_late(&self) -> &'a AtomicUsize {
        tracing::debug!("no HTTP/2 preface in time: connection closed");
        self.signals
            .preface_timeouts
            .fetch_add(1, Ordering::Relaxed);
        &self.signals.unused
    }

    /// Reads until the peer of a connection accepted during a shutdown sends a request
    /// (see `socket.rs`); what it read, or the tally of the connection's end when it is
    /// closed first: at the server's shutdown, when shed, or when the peer has not sent
    /// the preface in time.
    async fn hold_back<IO>(&self, io: &mut IO) -> Result<Bytes, &'a AtomicUsize>
    where
        IO: AsyncRead + Unpin,
    {
        let signals = self.signals;
        let progress = &self.tracked.progress;
        tokio::select! {
            biased;
            _ = signals.force.cancelled() => Err(&signals.unused),
            _ = signals.goaway.cancelled() => Err(&signals.unused),
            _ = self.tracked.shed() => Err(&signals.unused),
            _ = preface_late(progress, self.limits.preface_deadline) => Err(self.preface_late()),
            read = read_until_request(io, progress) => read.ok_or(&signals.unused),
        }
    }

    /// Serves HTTP/2 on `io` (the socket, or its TLS session) until the connection ends
    /// or the signals end it; returns the tally its end counts in.
    async fn serve_until_closed<IO, S, B>(self, mut io: IO, service: S) -> &'a AtomicUsize
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError> + Send,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let signals = self.signals;
        let read_ahead = if self.accepted_in_shutdown {
            match self.hold_back(&mut io).await {
                Ok(read) => read,
                Err(tally) => return tally,
            }
        } else {
            Bytes::new()
        };
        let (io, returned) = Lent::new(io);
        let tally = self.serve_http2(io, read_ahead, service).await;
        // h2 dropped the socket: after its final GOAWAY, close it without resetting a
        // request the peer sent meanwhile (see `linger.rs`). A cut connection closes at
        // once, and one whose peer never spoke has nothing to protect.
        if std::ptr::eq(tally, &signals.closed_gracefully)
            && let Ok(stream) = returned.await
        {
            linger(stream, LINGER).await;
        }
        tally
    }

    /// Serves HTTP/2 on `io` until the connection ends or the signals end it; returns
    /// the tally its end counts in. `io` is dropped when this returns.
    async fn serve_http2<IO, S, B>(
        self,
        io: Lent<IO>,
        read_ahead: Bytes,
        service: S,
    ) -> &'a AtomicUsize
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError> + Send,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let signals = self.signals;
        let tracked = self.tracked;
        let io = TokioIo::new(PeerSocket::new(io, read_ahead, tracked.progress.clone()));
        let conn = self
            .builder
            .serve_connection(io, ConnectionService::new(service));
        tokio::pin!(conn);

        // 1. Serve until the connection ends by itself, or the server, the table or the
        //    connection's own limits ask it to go. The signals and timers are polled only
        //    when one of them fired (`woken.rs`), not at each frame that wakes this task.
        let asked = PolledWhenWoken::new(asked_to_stop(
            signals,
            tracked,
            self.accepted_in_shutdown,
            &self.limits,
        ));
        let stop = tokio::select! {
            biased;
            stop = asked => stop,
            result = conn.as_mut() => {
                log_end(result);
                return &signals.closed_gracefully;
            }
        };
        tracked.leave();
        // Whether the connection starts its graceful close by itself (idle, or shed),
        // rather than at the server's word.
        let by_itself = match stop {
            Stop::Force => return &signals.forced,
            Stop::Goaway => false,
            Stop::PrefaceLate => return self.preface_late(),
            // A peer that has not sent the preface can have no stream: nothing to
            // protect with a GOAWAY.
            Stop::Shed | Stop::Idle if !tracked.progress.sent_preface() => {
                return &signals.unused;
            }
            Stop::Shed => true,
            Stop::Idle => {
                signals.idle_timeouts.fetch_add(1, Ordering::Relaxed);
                true
            }
        };
        if !by_itself && let Some(tally) = self.before_shutdown_goaway(conn.as_mut()).await {
            return tally;
        }
        // 2. h2 sends GOAWAY(last id = 2^31-1) with a PING, and the final GOAWAY with the
        //    real last stream id once the PING is answered, then closes when the last
        //    stream ends: a request crossing the first GOAWAY is still served (or refused
        //    as not executed), never silently lost.
        conn.as_mut().graceful_shutdown();
        signals.goaway_sent.fetch_add(1, Ordering::Relaxed);
        let goaway_at = Instant::now();
        tokio::select! {
            biased;
            _ = signals.force.cancelled() => return &signals.forced,
            result = conn.as_mut() => {
                log_end(result);
                return &signals.closed_gracefully;
            }
            // A peer that does not answer the PING, or ignores the GOAWAY and keeps the
            // socket open, would hold the connection for ever: once nothing is in flight
            // on it, nothing is lost by closing it — once h2 has written what it holds.
            _ = idle_after_goaway(signals, &tracked.peer, goaway_at, by_itself) => {}
        }
        flush_then_close(signals, conn.as_mut()).await
    }

    /// Before a GOAWAY the server's shutdown asked for: waits for the first request of
    /// a peer that dialled just before a hot upgrade's hand-over, and closes at once a
    /// connection whose peer never sent a byte. The tally of the connection's end when
    /// it ended meanwhile; `None` when the GOAWAY is to be sent.
    async fn before_shutdown_goaway<F>(&self, mut conn: Pin<&mut F>) -> Option<&'a AtomicUsize>
    where
        F: Future<Output = Result<(), hyper::Error>>,
    {
        let signals = self.signals;
        let peer = &self.tracked.peer;
        let progress = &self.tracked.progress;
        // A connection accepted before a hot upgrade's hand-over whose peer has not sent a
        // request yet: its client dialled this process a moment ago and is about to
        // call. A GOAWAY now would reach it before its request does, and a client that
        // does not re-send a request it had not sent yet on a new connection (tonic's
        // channel fails it: "operation was canceled", "connection closed") would lose
        // it. Nothing is refused after a hand-over, so the request is served here, and
        // the GOAWAY follows it; a peer that stays silent gets it FIRST_REQUEST_WAIT
        // after the accept.
        if signals.successor_accepts.is_cancelled() && !peer.has_requested() {
            tokio::select! {
                biased;
                _ = signals.force.cancelled() => return Some(&signals.forced),
                result = conn.as_mut() => {
                    log_end(result);
                    return Some(&signals.closed_gracefully);
                }
                _ = peer.requested() => {}
                _ = tokio::time::sleep_until(self.accepted + FIRST_REQUEST_WAIT) => {}
            }
        }
        // A peer that never sent a byte has not begun the HTTP/2 handshake: there is no
        // stream to protect, so close it ourselves rather than wait on it — after
        // PING_ANSWER_WAIT, for a peer that dialled just before the shutdown and is
        // about to send its request: it then gets the GOAWAY like any other, and a
        // request that crosses it is served.
        if !progress.heard() {
            tokio::select! {
                biased;
                _ = signals.force.cancelled() => return Some(&signals.forced),
                result = conn.as_mut() => {
                    log_end(result);
                    return Some(&signals.closed_gracefully);
                }
                _ = tokio::time::sleep(PING_ANSWER_WAIT) => {}
            }
            if !progress.heard() {
                return Some(&signals.unused);
            }
        }
        None
    }
}

/// Drives a connection with no call in flight until h2 has ended it, for at most
/// [`PING_ANSWER_WAIT`]; the tally its end counts in.
///
/// "No call in flight" means every response was handed to h2, not that h2 has written
/// it: the trailers of a call just ended (a stream cut at the drain bound, typically)
/// may still be in h2's buffers, and dropping the connection now would lose them — its
/// caller would see a broken connection instead of the status (seen in CI: "stream
/// closed because of a broken pipe" for a client stream cut at the bound). A peer that
/// answered the GOAWAY's PING lets h2 end the connection as soon as those frames are
/// written; one that did not is closed at the bound, its frames written by then.
async fn flush_then_close<'a, F>(
    signals: &'a ConnectionSignals,
    conn: Pin<&mut F>,
) -> &'a AtomicUsize
where
    F: Future<Output = Result<(), hyper::Error>>,
{
    tokio::select! {
        biased;
        _ = signals.force.cancelled() => &signals.forced,
        result = conn => {
            log_end(result);
            &signals.closed_gracefully
        }
        _ = tokio::time::sleep(PING_ANSWER_WAIT) => &signals.closed_idle,
    }
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests;
