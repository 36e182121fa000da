//! The signals a server sends all of its connections, and when they — or the
//! connection's own limits (`connection_timeouts.rs`), or the server's table of
//! connections (`connection_table.rs`) — ask one connection to stop serving: to close
//! now, or to start its graceful close (GOAWAY), and when a connection whose close
//! began may close without its peer's answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::call_bounds::ShutdownCut;
use super::connection_table::Tracked;
use super::connection_timeouts::{Limits, idle_for, preface_late};
use super::counts::ServerShutdown;
use super::peer::Peer;

/// How long a connection with no call in flight waits, once the server's shutdown has
/// begun, for its peer to answer the PING sent with its first GOAWAY before it is closed
/// without that answer. The answer proves that no request crossed the GOAWAY (RFC 9113
/// §6.8: "at least one round-trip time"); a peer that has not answered in 100 ms — far
/// more than a round trip between a provider and its clients — is mute or gone, and
/// holding the exit for it would only delay the process. Connections told to close as
/// their plain client called have had the whole time since for it already.
pub(crate) const PING_ANSWER_WAIT: Duration = Duration::from_millis(100);

/// Signals and tallies shared by a server and all of its connections.
#[derive(Debug, Default)]
pub(crate) struct ConnectionSignals {
    /// Set by `goaway_plain_clients_that_call`: from then on, a call of a plain client (not an
    /// rpc consumer) makes its connection start its graceful close, and a new connection
    /// is held back from HTTP/2 until its peer sends a request. A flag, not a token:
    /// every request reads it, none waits on it.
    pub(crate) plain_clients_go: Arc<AtomicBool>,
    /// Cancelled when every connection that never carried an rpc consumer's call must
    /// start its graceful close: `goaway_plain_clients`.
    pub(crate) goaway_plain: CancellationToken,
    /// Cancelled when every connection must start its graceful close, and connections
    /// held back during the shutdown must close: the server's shutdown.
    pub(crate) goaway: CancellationToken,
    /// Cancelled when connections whose graceful close has begun may be closed as soon
    /// as they carry no call (after [`PING_ANSWER_WAIT`]), whatever their peer does.
    pub(crate) close_idle: CancellationToken,
    /// Cancelled when connections must close now, whatever they carry.
    pub(crate) force: CancellationToken,
    /// Cancelled at a hot upgrade's hand-over: the successor accepts on the listening
    /// socket from now on, and this server refuses nothing while it drains.
    pub(crate) successor_accepts: CancellationToken,
    /// Connections open now.
    pub(crate) open: AtomicUsize,
    /// Connections that completed a graceful close after GOAWAY.
    pub(crate) closed_gracefully: AtomicUsize,
    /// Connections closed by us with no call in flight, without waiting for the peer.
    pub(crate) closed_idle: AtomicUsize,
    /// Connections closed by force (deadline or abort) while the peer still had them.
    pub(crate) forced: AtomicUsize,
    /// Connections closed without GOAWAY because the peer never began HTTP/2 with us:
    /// it sent no byte, or (accepted during a shutdown) no request.
    pub(crate) unused: AtomicUsize,
    /// Cut at the drain bound: calls still open end with `UNAVAILABLE`.
    pub(crate) cut: Arc<ShutdownCut>,
    /// Graceful closes begun: the first GOAWAY (with its PING) sent on a connection.
    pub(crate) goaway_sent: AtomicU64,
    /// Requests refused with `REFUSED_STREAM` (see `peer.rs`).
    pub(crate) refused: Arc<AtomicUsize>,
    /// Connections closed because their peer had not sent the preface in time.
    pub(crate) preface_timeouts: AtomicU64,
    /// Connections sent GOAWAY for carrying no call for the idle timeout.
    pub(crate) idle_timeouts: AtomicU64,
    /// `accept` failures for lack of a descriptor (`EMFILE`, `ENFILE`, ...).
    pub(crate) descriptor_shortages: AtomicU64,
}

impl ConnectionSignals {
    /// How the server's connections have ended so far, and the calls cut.
    pub(crate) fn tallies(&self) -> ServerShutdown {
        ServerShutdown {
            closed_gracefully: self.closed_gracefully.load(Ordering::Relaxed),
            closed_idle: self.closed_idle.load(Ordering::Relaxed),
            forced: self.forced.load(Ordering::Relaxed),
            unused: self.unused.load(Ordering::Relaxed),
            streams_cut: self.cut.calls(),
        }
    }
}

/// Why a connection it serves must stop.
pub(crate) enum Stop {
    /// The server: close now, whatever it carries.
    Force,
    /// The server: start the graceful close (see [`goaway_asked`]).
    Goaway,
    /// The server's table shed it to make room: close now if its peer never spoke,
    /// else start the graceful close and close once idle.
    Shed,
    /// Its peer has not sent the preface in time: close now (it began no HTTP/2).
    PrefaceLate,
    /// It carried no call for the idle timeout: start the graceful close and close
    /// once idle.
    Idle,
}

/// Resolves when this connection must stop, and says why; the first in the order of
/// [`Stop`] wins when several hold.
pub(crate) async fn asked_to_stop(
    signals: &ConnectionSignals,
    tracked: &Tracked,
    accepted_in_shutdown: bool,
    limits: &Limits,
) -> Stop {
    tokio::select! {
        biased;
        _ = signals.force.cancelled() => Stop::Force,
        _ = goaway_asked(signals, &tracked.peer, accepted_in_shutdown) => Stop::Goaway,
        _ = tracked.shed() => Stop::Shed,
        _ = preface_late(&tracked.progress, limits.preface_deadline) => Stop::PrefaceLate,
        _ = idle_for(&tracked.peer, limits.idle_timeout) => Stop::Idle,
    }
}

/// Resolves when this connection must start its graceful close: once plain clients
/// that call are sent away, when its plain client still calls (the closing mark did not
/// move it; see `peer.rs`); once plain clients are sent away, when it never carried an
/// rpc consumer's call; and at the server's shutdown in any case — when rpc consumers, who stopped choosing
/// this instance at its closing mark, close theirs as they always did. A connection
/// accepted during the shutdown waits for the server's shutdown: its client dialled
/// after the GOAWAYs and called without waiting for SETTINGS, and another GOAWAY would
/// only make it dial again.
async fn goaway_asked(signals: &ConnectionSignals, peer: &Peer, accepted_in_shutdown: bool) {
    let plain = async {
        signals.goaway_plain.cancelled().await;
        if accepted_in_shutdown || peer.reads_closing_mark() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = signals.goaway.cancelled() => {}
        _ = peer.must_go() => {}
        _ = plain => {}
    }
}

/// Resolves once the server's shutdown allows idle connections to close (or, when the
/// connection started its close `by_itself` — idle, or shed — at once), the peer has
/// had [`PING_ANSWER_WAIT`] since `goaway_at` to answer, and no call is in flight.
pub(crate) async fn idle_after_goaway(
    signals: &ConnectionSignals,
    peer: &Peer,
    goaway_at: Instant,
    by_itself: bool,
) {
    if !by_itself {
        signals.close_idle.cancelled().await;
    }
    tokio::time::sleep_until(goaway_at + PING_ANSWER_WAIT).await;
    peer.idle().await;
}
