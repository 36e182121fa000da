//! Export tonic services on a TCP listener, and close them on the lifecycle's terms.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Service;

use super::accept::{Connections, Listening};
use super::acceptor::{Listener, bind_tcp, set_backlog};
use super::connection_signals::ConnectionSignals;
use super::connection_table::ConnectionTable;
use super::counts::{ConnectionCounts, ServerShutdown};
use super::tls::ServerTls;
use super::{ServerOptions, TransportError};
use rpc_core::BoxError;

/// How long before a shutdown's bound the calls still open are ended with a status:
/// time for their trailers to reach the peers before connections are closed by force.
/// 100 ms: writing a trailers frame on an open connection takes well under 1 ms, so
/// this covers a loaded machine, and is small next to `step_timeout` (default 3 s).
pub const CUT_LEAD: Duration = Duration::from_millis(100);

/// A bound listener, not serving yet. Binding first and serving second lets the caller
/// learn the port (port 0 picks a free one) before anything is announced.
#[derive(Debug)]
pub struct Server {
    listener: Listener,
    local_addr: SocketAddr,
    options: ServerOptions,
    tls: Option<Arc<ServerTls>>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) on TCP with `options.listen_backlog`, or
    /// on `options.network` when it names one, and reads the TLS files if `options`
    /// name some.
    ///
    /// # Errors
    /// [`TransportError::InvalidOption`] when an option is out of its range
    /// ([`ServerOptions::check`]); [`TransportError::Bind`] when the address cannot be
    /// bound, e.g. the port is in use; [`TransportError::Tls`] when a TLS file cannot be used.
    pub async fn bind(addr: SocketAddr, options: ServerOptions) -> Result<Self, TransportError> {
        options.check()?;
        let bind_error = |source| TransportError::Bind { addr, source };
        let listener = match &options.network {
            None => Listener::Tcp(bind_tcp(addr, options.listen_backlog).map_err(bind_error)?),
            Some(network) => {
                Listener::Custom(network.stack().bind(addr).await.map_err(bind_error)?)
            }
        };
        Self::from_listener(listener, options, addr)
    }

    /// Serves on an already-bound listener, e.g. one inherited from a parent process
    /// (its backlog set to `options.listen_backlog`).
    ///
    /// # Errors
    /// [`TransportError::InvalidOption`] when an option is out of its range;
    /// [`TransportError::Bind`] when the socket cannot be registered with the runtime;
    /// [`TransportError::Tls`] when a TLS file cannot be used.
    pub fn from_std(
        listener: std::net::TcpListener,
        options: ServerOptions,
    ) -> Result<Self, TransportError> {
        options.check()?;
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let bind_error = |source| TransportError::Bind { addr, source };
        listener.set_nonblocking(true).map_err(bind_error)?;
        set_backlog(&listener, options.listen_backlog);
        let listener = TcpListener::from_std(listener).map_err(bind_error)?;
        Self::from_listener(Listener::Tcp(listener), options, addr)
    }

    fn from_listener(
        listener: Listener,
        options: ServerOptions,
        addr: SocketAddr,
    ) -> Result<Self, TransportError> {
        let local_addr = match &listener {
            Listener::Tcp(tcp) => tcp
                .local_addr()
                .map_err(|source| TransportError::Bind { addr, source })?,
            Listener::Custom(custom) => custom.local_addr(),
        };
        let tls = options.tls.clone().map(ServerTls::load).transpose()?;
        Ok(Self {
            listener,
            local_addr,
            options,
            tls,
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Starts accepting connections and serving `service` on each, in background tasks.
    /// The connection limit (`ServerOptions::connection_limit`) is fixed now.
    ///
    /// `service` is typically tonic's `Routes` wrapped in the provider filters.
    pub fn serve<S, B>(self, service: S) -> ServerHandle
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let handle = self.serve_later(service);
        handle.start_accepting();
        handle
    }

    /// As [`Server::serve`], but accepts no connection until
    /// [`ServerHandle::start_accepting`]: dials wait in the socket's backlog meanwhile.
    ///
    /// For a listening socket this process shares with another that still accepts on
    /// it (a hot upgrade's predecessor): until this process is ready, the kernel gives
    /// every dial to the other one, so a process that fails before it is ready has
    /// accepted nothing, and no call is lost with it.
    pub fn serve_later<S, B>(self, service: S) -> ServerHandle
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // A duplicate of the listening socket, for a hot upgrade's successor. Without
        // one (the descriptor table is full) the server still serves; an upgrade then
        // says why it cannot hand the socket over.
        let listening = match &self.listener {
            Listener::Tcp(tcp) => tcp.as_fd().try_clone_to_owned(),
            Listener::Custom(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the listener belongs to a custom network stack: it has no descriptor to hand over",
            )),
        };
        let shared = Arc::new(ServerControl {
            local_addr: self.local_addr,
            listening: Mutex::new(Some(listening)),
            start_accepting: CancellationToken::new(),
            stop_accepting: CancellationToken::new(),
            signals: Arc::new(ConnectionSignals::default()),
            table: ConnectionTable::new(self.options.connection_limit()),
            tracker: TaskTracker::new(),
            close_began: OnceLock::new(),
        });
        if let Some(tls) = &self.tls {
            shared
                .tracker
                .spawn(tls.clone().watch(shared.stop_accepting.clone()));
        }
        let options = &self.options;
        let connections = Connections {
            builder: options.http2_builder(),
            tls: self.tls,
            tls_handshake_timeout: options.tls_handshake_timeout,
            preface_timeout: options.preface_timeout,
            idle_timeout: options.idle_timeout.filter(|idle| !idle.is_zero()),
            tcp_user_timeout: options.tcp_user_timeout,
            accept_error_backoff: options.accept_error_backoff,
        };
        match self.listener {
            Listener::Tcp(tcp) => (shared.tracker)
                .spawn(Listening::new(tcp, connections, &shared).accept_loop(service)),
            Listener::Custom(custom) => (shared.tracker)
                .spawn(Listening::new(custom, connections, &shared).accept_loop(service)),
        };
        ServerHandle { shared }
    }
}

impl<L> Listening<L> {
    /// The accept loop of `shared`'s server on `listener`.
    fn new(listener: L, connections: Connections, shared: &ServerControl) -> Self {
        Self {
            listener,
            connections,
            local_addr: shared.local_addr,
            start_accepting: shared.start_accepting.clone(),
            stop_accepting: shared.stop_accepting.clone(),
            signals: shared.signals.clone(),
            tracker: shared.tracker.clone(),
            table: shared.table.clone(),
        }
    }
}

/// What the accept loop and every [`ServerHandle`] of one server share: its address, the
/// kept listening socket, the signals to its connections and their tally.
#[derive(Debug)]
struct ServerControl {
    local_addr: SocketAddr,
    /// A close-on-exec duplicate of the listening socket, kept open after the accept
    /// loop stops (see [`ServerHandle::stop_accepting`]) until shutdown or abort.
    listening: Mutex<Option<io::Result<OwnedFd>>>,
    /// Cancelled when the accept loop may begin ([`ServerHandle::start_accepting`]).
    start_accepting: CancellationToken,
    stop_accepting: CancellationToken,
    signals: Arc<ConnectionSignals>,
    /// Its live connections, and what it shed to stay under its limit.
    table: Arc<ConnectionTable>,
    tracker: TaskTracker,
    /// The tallies when the close began (the first GOAWAY or the shutdown): what
    /// [`ServerHandle::shutdown`] reports is counted from there.
    close_began: OnceLock<ServerShutdown>,
}

/// Controls a serving [`Server`]: its address, its connections, and how it stops.
///
/// Cheap to clone. Dropping every handle does not stop the server; call
/// [`ServerHandle::shutdown`] or [`ServerHandle::abort`].
#[derive(Clone, Debug)]
pub struct ServerHandle {
    shared: Arc<ServerControl>,
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.signals.open.load(Ordering::Relaxed)
    }

    /// Connections open now, graceful closes begun so far, and what the server's
    /// protections closed (for metrics; relaxed loads, no lock).
    pub fn connection_counts(&self) -> ConnectionCounts {
        let signals = &self.shared.signals;
        let (shed_never_spoken, shed_idle, refused_at_limit) = self.shared.table.tallies();
        ConnectionCounts {
            open: signals.open.load(Ordering::Relaxed),
            goaway_sent: signals.goaway_sent.load(Ordering::Relaxed),
            preface_timeouts: signals.preface_timeouts.load(Ordering::Relaxed),
            idle_timeouts: signals.idle_timeouts.load(Ordering::Relaxed),
            shed_never_spoken,
            shed_idle,
            refused_at_limit,
            descriptor_shortages: signals.descriptor_shortages.load(Ordering::Relaxed),
        }
    }

    /// From now on a call of a plain gRPC client — one that is not an rpc consumer, and
    /// so reads no closing mark — makes its connection start its graceful close (the
    /// first GOAWAY, with its PING): the call is still served, the client opens no new
    /// stream on the connection; and a new connection is held back from HTTP/2 until its
    /// peer sends a request, so a gRPC client that dials again (and waits for the
    /// server's SETTINGS first) calls another instance. rpc consumers' connections, and
    /// those of clients that stopped calling, stay as they are; the listener stays open
    /// (see `socket.rs`). (The lifecycle calls it one offline window into a shutdown.)
    pub fn goaway_plain_clients_that_call(&self) {
        self.begin_close();
        self.shared
            .signals
            .plain_clients_go
            .store(true, Ordering::Release);
    }

    /// Starts the graceful close of every connection that never
    /// carried an rpc consumer's call, so that no plain client
    /// opens new streams while requests are refused. rpc consumers stopped choosing
    /// this instance at its closing mark; their connections close in
    /// [`ServerHandle::shutdown`], as before.
    pub fn goaway_plain_clients(&self) {
        self.begin_close();
        self.shared.signals.goaway_plain.cancel();
    }

    /// Marks where the close begins (the first call only; the goaway methods and
    /// `shutdown` mark it too): [`ServerShutdown`] counts the connections that end from
    /// here. The lifecycle marks it as its shutdown starts, before consumers move away.
    pub fn begin_close(&self) {
        self.shared
            .close_began
            .get_or_init(|| self.shared.signals.tallies());
    }

    /// Stops accepting and closes every connection gracefully, by `deadline`.
    ///
    /// In order: the listener is closed (new dials are refused); every connection that
    /// has begun HTTP/2 gets the two-step GOAWAY (unless it already has) and is awaited;
    /// connections whose peer never sent a byte (or, accepted during the shutdown, no
    /// request) are closed at once, and so is every
    /// connection with no call in flight once its peer has had 100 ms to answer its
    /// GOAWAY's PING (a mute peer, or one that ignores the GOAWAY, holds nothing). Calls
    /// still open [`CUT_LEAD`] before `deadline` are ended with `UNAVAILABLE`, "provider
    /// shut down before the stream ended", so their callers learn why (the lead lets
    /// those trailers reach them); whatever connection is still open at `deadline` is
    /// then closed by force. Never waits past `deadline`, whatever the peers do.
    pub async fn shutdown(&self, deadline: Instant) -> ServerShutdown {
        let signals = &self.shared.signals;
        self.begin_close();
        let before = self.shared.close_began.get().copied().unwrap_or_default();
        self.shared.stop_accepting.cancel();
        self.shared.listening.lock().take();
        signals.goaway.cancel();
        signals.close_idle.cancel();
        self.shared.tracker.close();
        let cut_at = deadline.checked_sub(CUT_LEAD).unwrap_or(deadline);
        let closed = |bound| tokio::time::timeout_at(bound, self.shared.tracker.wait());
        if closed(cut_at).await.is_err() {
            signals.cut.cut();
            if closed(deadline).await.is_err() {
                signals.force.cancel();
                self.shared.tracker.wait().await;
            }
        }
        let after = self.shared.signals.tallies();
        ServerShutdown {
            closed_gracefully: after.closed_gracefully - before.closed_gracefully,
            closed_idle: after.closed_idle - before.closed_idle,
            forced: after.forced - before.forced,
            unused: after.unused - before.unused,
            streams_cut: after.streams_cut - before.streams_cut,
        }
    }

    /// Requests refused with `REFUSED_STREAM` so far: requests of clients that are not
    /// rpc consumers, sent once refusals had begun (see `peer.rs`).
    pub fn refused_streams(&self) -> usize {
        self.shared.signals.refused.load(Ordering::Relaxed)
    }

    /// Starts accepting, for a server made with [`Server::serve_later`] (at once
    /// otherwise; calling it again does nothing).
    pub fn start_accepting(&self) {
        self.shared.start_accepting.cancel();
    }

    /// Stops accepting connections *without closing the listening socket*: the hot
    /// upgrade's successor accepts on the same socket from now on (it holds its own
    /// descriptor of it), so a dial in between waits in the socket's backlog for the
    /// successor instead of being refused. Connections already accepted are served on;
    /// [`ServerHandle::shutdown`] later GOAWAYs them (and closes this process's
    /// descriptor) — each connection whose peer has not sent a request yet only after
    /// its first request, or after a second of silence: its client dialled just before
    /// the hand-over and is about to call, and nothing is refused while this server
    /// drains.
    pub fn stop_accepting(&self) {
        self.shared.signals.successor_accepts.cancel();
        self.shared.stop_accepting.cancel();
    }

    /// A new close-on-exec descriptor of the listening socket, to hand to a successor
    /// process (see `transport::ListenFds`).
    ///
    /// # Errors
    /// When the server was shut down or aborted, or the descriptor cannot be duplicated
    /// (e.g. too many open files).
    pub fn listener_fd(&self) -> io::Result<OwnedFd> {
        match &*self.shared.listening.lock() {
            Some(Ok(fd)) => fd.try_clone(),
            Some(Err(error)) => Err(io::Error::new(error.kind(), error.to_string())),
            None => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the server is shut down: its listening socket is closed",
            )),
        }
    }

    /// Calls (streams) ended at a shutdown's bound so far.
    pub fn streams_cut(&self) -> usize {
        self.shared.signals.cut.calls()
    }

    /// Closes the listener and every connection at once, dropping requests in flight:
    /// what a plain process restart does. For comparisons and tests.
    pub async fn abort(&self) {
        self.shared.stop_accepting.cancel();
        self.shared.listening.lock().take();
        self.shared.signals.force.cancel();
        self.shared.tracker.close();
        self.shared.tracker.wait().await;
    }
}
