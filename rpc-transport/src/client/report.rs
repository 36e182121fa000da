//! What one request's sending tells its caller beyond the response: whether its stream
//! was opened ("sent", in gRPC A6's sense: a request whose stream never opened certainly
//! did not run), and a way to check the connection it went on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::link::{Link, Liveness};

/// The report of one request sent with
/// [`InstanceConnection::send`](crate::InstanceConnection::send): made by the caller
/// before the call (it costs no allocation), filled in by the transport as the request
/// goes.
#[derive(Debug, Default)]
pub struct SendReport {
    opened: AtomicBool,
    /// The connection's count of reads that brought bytes when the stream opened.
    heard_at_open: AtomicU64,
    link: OnceLock<Arc<Link>>,
}

impl SendReport {
    /// Whether the request's HTTP/2 stream was opened: its headers were handed to the
    /// connection to write. `false` means the request certainly did not reach the
    /// instance — no connection, no stream permit before the caller gave up, or the
    /// connection refused new streams — whatever the error says; `true` means it may
    /// have (unless the instance refused the stream: `REFUSED_STREAM`, or a GOAWAY
    /// whose last stream id excludes it). A client stream's handler can run on its
    /// headers alone, so sending the body is not what counts.
    pub fn stream_opened(&self) -> bool {
        self.opened.load(Ordering::Acquire)
    }

    /// Whether the peer has sent anything on the request's connection since its stream
    /// opened (any frame: an answer to another call, a PING's): its connection task
    /// was alive after the request left.
    pub fn heard_since_opened(&self) -> bool {
        self.stream_opened()
            && self
                .link
                .get()
                .is_some_and(|link| link.heard() != self.heard_at_open.load(Ordering::Relaxed))
    }

    /// Checks the connection the request went on with an HTTP/2 PING (one for every
    /// caller that asks at once), sent after this call: [`Liveness::Alive`] when the
    /// peer answered it or sent anything meanwhile, [`Liveness::Unresponsive`] when it
    /// did not within the probe timeout — the connection is then closed, so the calls
    /// on it end now rather than at their timeouts. `None` when the request never
    /// reached a connection (nothing to check). Cancel-safe.
    pub async fn probe(&self) -> Option<Liveness> {
        let link = self.link.get()?;
        Some(link.probe().await)
    }

    /// Whether the request reached a connection (open already, or made for it): false
    /// while its dial is under way, and after a dial that failed. A caller whose answer
    /// is overdue before that has nothing to PING and can tell the instance is slow to
    /// even accept a connection.
    pub fn reached_connection(&self) -> bool {
        self.link.get().is_some()
    }

    /// Whether the connection the request went on was closed because it did not
    /// answer a PING (a host that vanished, a paused process) — whoever asked for it.
    pub fn connection_unresponsive(&self) -> bool {
        self.link.get().is_some_and(|link| link.was_unresponsive())
    }

    pub(super) fn on(&self, link: &Arc<Link>) {
        let _ = self.link.set(link.clone());
    }

    pub(super) fn opened(&self, link: &Link) {
        self.heard_at_open.store(link.heard(), Ordering::Relaxed);
        self.opened.store(true, Ordering::Release);
    }
}
