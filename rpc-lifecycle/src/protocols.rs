//! What shutdown step 6 closes (and an abort, and a hot upgrade's old process after its
//! hand-over): listeners and connections, references, registries, and last what the
//! composition root handed over (the admin endpoint).
//!
//! Closing the connections is written once, [`close_connections`], for step 6
//! and for the upgrade's drain alike: the bounded GOAWAY exchange on every server, the
//! wait for the inbound requests' last guards, and the tally of what had to be cut.

use std::sync::Arc;

use futures_util::future::{BoxFuture, join_all};
use parking_lot::Mutex;
use rpc_core::{InflightCounter, ManagedReference, Registry};
use rpc_transport::{ConnectionCounts, ServerHandle};
use tokio::time::Instant;

use crate::bounds::SequenceBounds;

/// Something [`crate::Lifecycle::close_in_step_6`] was handed.
pub(crate) type Closer = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// What this application opened, until step 6 takes it to close.
#[derive(Default)]
pub(crate) struct Protocols {
    open: Mutex<Opened>,
    /// Every server ever started, including those closed since, so that counts
    /// observers read (GOAWAYs sent) never go back.
    served: Mutex<Vec<ServerHandle>>,
}

/// What is open: taken out as a whole by [`Protocols::take`] to be closed.
#[derive(Default)]
pub(crate) struct Opened {
    pub(crate) servers: Vec<ServerHandle>,
    references: Vec<Arc<dyn ManagedReference>>,
    registries: Vec<Arc<dyn Registry>>,
    closers: Vec<Closer>,
}

/// What closing the connections of the servers came to, summed over servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConnectionTally {
    /// Closed after the graceful GOAWAY exchange.
    pub(crate) closed: usize,
    /// Closed by us with nothing in flight.
    pub(crate) idle: usize,
    /// Closed at the bound with calls still on them.
    pub(crate) forced: usize,
    /// Calls still open at the bound, ended with `UNAVAILABLE`.
    pub(crate) streams_cut: usize,
    /// Requests of plain clients refused with `REFUSED_STREAM`.
    pub(crate) refused_streams: usize,
}

impl Protocols {
    /// A server start-up started.
    pub(crate) fn add_server(&self, server: ServerHandle) {
        self.served.lock().push(server.clone());
        self.open.lock().servers.push(server);
    }

    /// A reference start-up subscribed.
    pub(crate) fn add_reference(&self, reference: Arc<dyn ManagedReference>) {
        self.open.lock().references.push(reference);
    }

    /// The registries to close in step 6.
    pub(crate) fn set_registries(&self, registries: Vec<Arc<dyn Registry>>) {
        self.open.lock().registries = registries;
    }

    /// Something to close last in step 6.
    pub(crate) fn add_closer(&self, closer: Closer) {
        self.open.lock().closers.push(closer);
    }

    /// The servers open now.
    pub(crate) fn servers(&self) -> Vec<ServerHandle> {
        self.open.lock().servers.clone()
    }

    /// Whether any server is open (a consumer-only application has none).
    pub(crate) fn serves(&self) -> bool {
        !self.open.lock().servers.is_empty()
    }

    /// The connections of every server ever started, summed.
    pub(crate) fn connection_counts(&self) -> ConnectionCounts {
        self.served
            .lock()
            .iter()
            .map(ServerHandle::connection_counts)
            .fold(ConnectionCounts::default(), |sum, counts| sum + counts)
    }

    /// Takes out everything open, to be closed.
    pub(crate) fn take(&self) -> Opened {
        std::mem::take(&mut *self.open.lock())
    }
}

impl Opened {
    /// Closes the references' channels and subscriptions, then the registries, then
    /// what the composition root handed over.
    pub(crate) async fn release(self) {
        join_all(self.references.iter().map(|reference| reference.close())).await;
        join_all(
            self.registries
                .iter()
                .map(|registry| close_registry(registry.clone())),
        )
        .await;
        join_all(self.closers.into_iter().map(|close| close())).await;
    }
}

async fn close_registry(registry: Arc<dyn Registry>) {
    if let Err(error) = registry.close().await {
        tracing::warn!(registry = registry.url(), %error, "closing registry failed");
    }
}

/// Closes every server's listener and connections (the GOAWAY exchange) by `bound`
/// — at once after an interrupt: nobody waits for a GOAWAY exchange then — and waits,
/// within the same bound, for the last inbound guards, which drop just after their
/// connection closes.
pub(crate) async fn close_connections(
    servers: &[ServerHandle],
    inbound: &InflightCounter,
    bounds: &SequenceBounds,
) -> ConnectionTally {
    let bound = if bounds.interrupted() {
        Instant::now()
    } else {
        bounds.step_end()
    };
    let closing = join_all(servers.iter().map(|server| server.shutdown(bound)));
    let inbound_done = bounds.wait(inbound.wait_idle(), bound);
    let (closed, _) = tokio::join!(closing, inbound_done);
    let mut tally = ConnectionTally::default();
    for (server, connections) in servers.iter().zip(closed) {
        tally.closed += connections.closed_gracefully;
        tally.idle += connections.closed_idle;
        tally.forced += connections.forced;
        tally.streams_cut += connections.streams_cut;
        tally.refused_streams += server.refused_streams();
    }
    tally
}
