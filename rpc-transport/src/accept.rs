//! The accept loop of a server: each accepted socket set up (`TCP_NODELAY`,
//! `TCP_USER_TIMEOUT`; `acceptor.rs`), admitted into the table of connections (which sheds another
//! to make room at the limit; `connection_table.rs`), and served on a task of its own;
//! and what the loop does when `accept` fails.
//!
//! An `accept` that fails for lack of a descriptor (`EMFILE`: the process's limit;
//! `ENFILE`: the system's; `ENOBUFS`/`ENOMEM`: socket memory) leaves the connection in
//! the kernel's queue. Backing off alone, as axum and tonic do, serves no one until a
//! peer leaves by itself, which a flood of silent connections never does. So the loop
//! sheds one connection (the table's order: one that never spoke, else an idle one),
//! waits for its socket to close, and accepts again at once; only when there is
//! nothing to shed, or for any other error, does it back off (`accept_error_backoff`).
//! It never spins, and never stops accepting for good.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::TokioExecutor;
use nix::errno::Errno;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Service;

use super::acceptor::Acceptor;
use super::connection::{self, Handshake};
use super::connection_signals::ConnectionSignals;
use super::connection_table::ConnectionTable;
use super::connection_timeouts::Limits;
use super::tls::ServerTls;
use rpc_core::BoxError;

/// Longest wait for a shed connection's socket to close before `accept` is tried again.
/// One that never spoke closes as soon as its task runs; an idle one after its GOAWAY's
/// PING is answered, or 100 ms without an answer, and its lingering close (100 ms at
/// most). 1 s covers both on a loaded machine; if it passes, the loop sheds another.
const SHED_CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Most connections shed and still open before the loop waits for the oldest of them
/// to close. Shedding at the limit does not wait for the shed connection's task to
/// close its socket, and a flood is accepted faster than those tasks run: measured, 1 100
/// silent connections at a provider with 1 024 descriptors and the default limit (896)
/// took the shed-but-open ones past the 128 descriptors left above the limit, and
/// `accept` failed with `EMFILE` twice. 16 keeps the overshoot well inside that
/// headroom, and costs a flood only the wait for a task to run.
const MAX_CLOSING_SHED: usize = 16;

/// How each accepted connection is served: hyper's HTTP/2 settings, TLS first if
/// configured, its socket options and its own limits.
pub(crate) struct Connections {
    pub(crate) builder: http2::Builder<TokioExecutor>,
    pub(crate) tls: Option<Arc<ServerTls>>,
    pub(crate) tls_handshake_timeout: Duration,
    pub(crate) preface_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) tcp_user_timeout: Option<Duration>,
    pub(crate) accept_error_backoff: Duration,
}

/// A server's listener, and what its accept loop shares with the server's handles.
pub(crate) struct Listening<L> {
    pub(crate) listener: L,
    pub(crate) connections: Connections,
    pub(crate) local_addr: SocketAddr,
    /// Cancelled when the loop may begin accepting (`Server::serve_later`).
    pub(crate) start_accepting: CancellationToken,
    pub(crate) stop_accepting: CancellationToken,
    pub(crate) signals: Arc<ConnectionSignals>,
    pub(crate) tracker: TaskTracker,
    pub(crate) table: Arc<ConnectionTable>,
}

impl<L: Acceptor> Listening<L> {
    /// Accepts and serves `service` on each connection from when `start_accepting`
    /// until `stop_accepting` is cancelled.
    pub(crate) async fn accept_loop<S, B>(mut self, service: S)
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        tokio::select! {
            biased;
            _ = self.stop_accepting.cancelled() => {}
            _ = self.start_accepting.cancelled() => self.accept_until_stopped(service).await,
        }
        // Returning drops the listener. In a shutdown, `shutdown` has dropped the
        // duplicate too: the port is closed before connections drain, so new dials are
        // refused at once (and retried elsewhere) instead of hanging. After
        // `stop_accepting` alone the duplicate (and a hot upgrade's successor) keep the
        // socket open.
        tracing::debug!(addr = %self.local_addr, "accept loop ended");
    }

    async fn accept_until_stopped<S, B>(&mut self, service: S)
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        loop {
            let accepted = tokio::select! {
                biased;
                _ = self.stop_accepting.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    self.serve(stream, peer, &service);
                    self.while_too_many_closing().await;
                }
                Err(error) if lacks_descriptors(&error) => self.make_room(&error).await,
                Err(error) => {
                    tracing::warn!(%error, addr = %self.local_addr, "accept failed; backing off");
                    self.back_off().await;
                }
            }
        }
    }

    /// Sets up `stream`, admits it (or closes it when the table is full of calls), and
    /// serves it with `service` on a task of its own.
    fn serve<S, B>(&self, stream: L::Stream, peer: SocketAddr, service: &S)
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let connections = &self.connections;
        L::set_up(&stream, connections.tcp_user_timeout);
        let info = L::connect_info(&stream, peer, self.local_addr);
        let Some(admitted) = self.table.admit() else {
            tracing::debug!(
                addr = %self.local_addr,
                "connection limit reached and every connection carries a call: new connection closed"
            );
            return;
        };
        let limits = Limits {
            preface_deadline: Instant::now() + connections.preface_timeout,
            idle_timeout: connections.idle_timeout,
        };
        // The acceptor is taken now: a connection accepted after a reload uses the new
        // certificate, the ones before keep theirs.
        let tls = connections.tls.as_ref().map(|tls| Handshake {
            acceptor: tls.acceptor(),
            timeout: connections.tls_handshake_timeout,
        });
        self.tracker.spawn(connection::serve(
            (stream, info),
            tls,
            service.clone(),
            connections.builder.clone(),
            self.signals.clone(),
            admitted,
            limits,
        ));
    }

    /// `accept` lacked a descriptor: sheds a connection and waits for its socket to
    /// close, or backs off when there is none to shed.
    async fn make_room(&self, error: &io::Error) {
        self.signals
            .descriptor_shortages
            .fetch_add(1, Ordering::Relaxed);
        let Some(closed) = self.table.shed_one() else {
            tracing::warn!(
                %error,
                addr = %self.local_addr,
                "accept failed: out of descriptors and every connection carries a call; backing off"
            );
            return self.back_off().await;
        };
        tracing::debug!(%error, addr = %self.local_addr, "accept failed: shedding a connection");
        tokio::select! {
            _ = self.stop_accepting.cancelled() => {}
            _ = closed.cancelled() => {}
            _ = tokio::time::sleep(SHED_CLOSE_WAIT) => {}
        }
    }

    /// Waits for the oldest shed connection to close while [`MAX_CLOSING_SHED`] or more
    /// are still open, so that descriptors stay within that many of the limit.
    async fn while_too_many_closing(&self) {
        while let Some(closed) = self.table.closing_backlog(MAX_CLOSING_SHED) {
            tokio::select! {
                _ = self.stop_accepting.cancelled() => return,
                _ = closed.cancelled() => {}
                // A connection that does not close in time (an idle one whose peer
                // does not answer) leaves the limit to the kernel's: `accept` sheds
                // another if descriptors run out.
                _ = tokio::time::sleep(SHED_CLOSE_WAIT) => return,
            }
        }
    }

    /// Waits `accept_error_backoff`, or less if the server stops accepting meanwhile.
    async fn back_off(&self) {
        tokio::select! {
            _ = self.stop_accepting.cancelled() => {}
            _ = tokio::time::sleep(self.connections.accept_error_backoff) => {}
        }
    }
}

/// Whether `error` says that `accept` lacked a descriptor or socket memory, which only
/// closing a socket cures.
fn lacks_descriptors(error: &io::Error) -> bool {
    let Some(code) = error.raw_os_error() else {
        return false;
    };
    matches!(
        Errno::from_raw(code),
        Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lack_of_descriptors_or_socket_memory_is_cured_by_shedding() {
        for errno in [Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM] {
            assert!(lacks_descriptors(&io::Error::from_raw_os_error(
                errno as i32
            )));
        }
        for errno in [Errno::ECONNABORTED, Errno::EPERM, Errno::EINTR] {
            assert!(!lacks_descriptors(&io::Error::from_raw_os_error(
                errno as i32
            )));
        }
        assert!(!lacks_descriptors(&io::Error::other("not from the kernel")));
    }
}
