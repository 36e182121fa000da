//! The phases an application goes through: an atomic read on the request path
//! ([`PhaseReader`]), a `watch` channel for observers.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

/// Where an application is in its life. Phases only move forward, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Phase {
    /// Built, not started.
    Created = 0,
    /// Subscribing references, binding listeners, running readiness gates, registering.
    Starting,
    /// Registered and serving.
    Serving,
    /// A hot upgrade's new process serves this instance now: this process stopped
    /// accepting, gave up its registrations without withdrawing them, and drains what
    /// its connections still carry (GOAWAY). Not closing: its responses carry no
    /// closing mark, since the instance itself stays (the new process serves it).
    HandedOver,
    /// Shutdown step 1: withdrawing registrations. From here on responses carry the
    /// closing mark and the health service reports NOT_SERVING.
    Unregistering,
    /// Shutdown step 2: giving consumers time to notice.
    WaitingForConsumers,
    /// Shutdown step 3: new inbound requests are refused as "closing, not executed".
    Rejecting,
    /// Shutdown step 4: waiting for inbound requests in flight.
    DrainingInbound,
    /// Shutdown step 5: waiting for outbound requests in flight.
    DrainingOutbound,
    /// Shutdown step 6: closing listeners, connections, channels, subscriptions, registries.
    Destroying,
    /// Shutdown step 7: running the application's shutdown callbacks.
    Callbacks,
    /// Finished (after shutdown, or after a failed start was undone).
    Stopped,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 12] = [
        Phase::Created,
        Phase::Starting,
        Phase::Serving,
        Phase::HandedOver,
        Phase::Unregistering,
        Phase::WaitingForConsumers,
        Phase::Rejecting,
        Phase::DrainingInbound,
        Phase::DrainingOutbound,
        Phase::Destroying,
        Phase::Callbacks,
        Phase::Stopped,
    ];

    /// Whether responses should carry the closing mark (shutdown has begun).
    pub fn is_closing(self) -> bool {
        self >= Phase::Unregistering
    }

    /// Whether new inbound requests are refused.
    pub fn rejects_inbound(self) -> bool {
        self >= Phase::Rejecting
    }

    /// Whether new outbound calls are refused (after outbound drained).
    pub fn rejects_outbound(self) -> bool {
        self >= Phase::Destroying
    }

    fn from_u8(value: u8) -> Phase {
        Phase::ALL[value as usize]
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Phase::Created => "created",
            Phase::Starting => "starting",
            Phase::Serving => "serving",
            Phase::HandedOver => "handed-over",
            Phase::Unregistering => "unregistering",
            Phase::WaitingForConsumers => "waiting-for-consumers",
            Phase::Rejecting => "rejecting",
            Phase::DrainingInbound => "draining-inbound",
            Phase::DrainingOutbound => "draining-outbound",
            Phase::Destroying => "destroying",
            Phase::Callbacks => "callbacks",
            Phase::Stopped => "stopped",
        };
        f.write_str(name)
    }
}

/// A read-only view of an application's current phase, for the request path: one
/// atomic load per read, no lock, no channel. Built by the lifecycle's [`PhaseCell`]; it
/// cannot move the phase.
///
/// Cheap to clone (one `Arc`); all clones see the same phase.
#[derive(Clone, Debug)]
pub struct PhaseReader {
    phase: Arc<AtomicU8>,
}

impl PhaseReader {
    /// The current phase (one atomic load).
    pub fn get(&self) -> Phase {
        // SeqCst pairs with the in-flight counter's increment that precedes this read in
        // the filters (see rpc-filter's graceful module): admission and drain cannot
        // miss each other.
        Phase::from_u8(self.phase.load(Ordering::SeqCst))
    }
}

/// The current phase: an atomic for the request path, a `watch` channel for observers.
///
/// The lifecycle owns the one cell of an application and is the only writer; everything
/// else gets a [`PhaseReader`] or a `watch` receiver.
#[derive(Debug)]
pub struct PhaseCell {
    /// Shared with every [`PhaseReader`].
    fast: Arc<AtomicU8>,
    tx: watch::Sender<Phase>,
    /// Every phase entered, with when: a `watch` receiver sees only the latest.
    history: Mutex<Vec<(Phase, Instant)>>,
    name: String,
}

impl PhaseCell {
    /// A cell in [`Phase::Created`] for the application `name` (used in logs).
    pub fn new(name: String) -> Self {
        Self {
            fast: Arc::new(AtomicU8::new(Phase::Created as u8)),
            tx: watch::Sender::new(Phase::Created),
            history: Mutex::new(vec![(Phase::Created, Instant::now())]),
            name,
        }
    }

    /// The current phase (one atomic load).
    pub fn get(&self) -> Phase {
        Phase::from_u8(self.fast.load(Ordering::SeqCst))
    }

    /// A read-only view of this phase for the request path.
    pub fn reader(&self) -> PhaseReader {
        PhaseReader {
            phase: self.fast.clone(),
        }
    }

    /// A receiver that sees every phase change.
    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }

    /// Every phase entered so far, with the time it was entered (tokio's clock).
    pub fn history(&self) -> Vec<(Phase, Instant)> {
        self.history.lock().clone()
    }

    /// Moves to `next` if it is later than the current phase, logging how long the
    /// previous phase lasted. Returns whether the phase changed.
    pub fn advance(&self, next: Phase) -> bool {
        let previous = Phase::from_u8(self.fast.fetch_max(next as u8, Ordering::SeqCst));
        if previous >= next {
            return false;
        }
        let now = Instant::now();
        let lasted = {
            let mut history = self.history.lock();
            let entered = history.last().map_or(now, |(_, at)| *at);
            history.push((next, now));
            now - entered
        };
        tracing::info!(
            app = %self.name,
            from = %previous,
            to = %next,
            lasted_ms = lasted.as_millis() as u64,
            "phase changed"
        );
        self.tx.send_replace(next);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_only_move_forward() {
        let cell = PhaseCell::new("t".into());
        let mut rx = cell.subscribe();
        assert!(cell.advance(Phase::Serving));
        assert!(!cell.advance(Phase::Starting));
        assert_eq!(cell.get(), Phase::Serving);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), Phase::Serving);
    }

    #[test]
    fn a_reader_sees_every_advance() {
        let cell = PhaseCell::new("t".into());
        let reader = cell.reader();
        assert_eq!(reader.get(), Phase::Created);
        cell.advance(Phase::Rejecting);
        assert_eq!(reader.get(), Phase::Rejecting);
        assert_eq!(reader.clone().get(), cell.get());
    }

    #[test]
    fn predicates_follow_the_order() {
        assert!(!Phase::Serving.is_closing());
        assert!(!Phase::HandedOver.is_closing());
        assert!(!Phase::HandedOver.rejects_inbound());
        assert!(Phase::Unregistering.is_closing());
        assert!(!Phase::WaitingForConsumers.rejects_inbound());
        assert!(Phase::Rejecting.rejects_inbound());
        assert!(!Phase::DrainingOutbound.rejects_outbound());
        assert!(Phase::Destroying.rejects_outbound());
    }
}
