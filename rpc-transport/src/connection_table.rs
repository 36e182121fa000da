//! The server's table of its live connections, and which one it sheds to make room.
//!
//! Descriptors are the resource a flood of connections exhausts first: at
//! `RLIMIT_NOFILE` every `accept` fails with `EMFILE`, and a server that only backs off
//! serves no one until some peer leaves by itself — measured before this table, 1 100
//! connections that never sent a byte, at a provider with `ulimit -n 1024`, kept a
//! legitimate client out for as long as they stayed (25 s and more; nothing closed
//! them). So a server keeps at most `max_connections`, and when one more arrives at
//! the limit (or `accept` lacks a descriptor) it gives up, in this order:
//!
//! 1. the oldest connection whose peer never sent the HTTP/2 preface: it carries
//!    nothing, and is most likely part of the flood (a legitimate client speaks the
//!    moment it has connected) — closed at once;
//! 2. else the oldest connection with no call in flight: it gets the graceful close
//!    (GOAWAY, then closed once idle), and its client dials again when it next calls;
//! 3. else, every connection carrying a call, the new connection: closed at once.
//!
//! The table is touched once per accept and once per close (one lock each); whether a
//! peer spoke and whether it has a call in flight are read from the connection's own
//! atomics, and only at the limit (a scan in accept order, which ends at the first
//! silent connection in a flood). Nothing here is touched per request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::peer::Peer;
use super::socket::Progress;

/// What the table and a connection's task share: how far its peer got, its calls, and
/// the table's word to go.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    /// How far the peer got into HTTP/2.
    pub(crate) progress: Arc<Progress>,
    /// What the connection's requests show of the peer, and its calls in flight.
    pub(crate) peer: Arc<Peer>,
    /// Cancelled when the table sheds this connection.
    shed: CancellationToken,
    /// Cancelled once the connection's socket is closed and it left the table.
    closed: CancellationToken,
    /// Set once the connection has begun to close by any other way: it frees its
    /// descriptor by itself, and shedding it would count it twice.
    leaving: AtomicBool,
}

impl Tracked {
    /// Resolves once the table has shed this connection.
    pub(crate) async fn shed(&self) {
        self.shed.cancelled().await;
    }

    /// Notes that the connection has begun to close: the table sheds others.
    pub(crate) fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
    }
}

/// The live connections of one server, and its tallies of what it shed.
#[derive(Debug)]
pub(crate) struct ConnectionTable {
    limit: usize,
    live: Mutex<Live>,
    /// Connections closed to make room before their peer sent the preface.
    shed_never_spoken: AtomicU64,
    /// Connections with no call in flight sent GOAWAY to make room.
    shed_idle: AtomicU64,
    /// New connections closed at once: at the limit with nothing to shed.
    refused: AtomicU64,
}

/// The table's contents, under its lock.
#[derive(Debug, Default)]
struct Live {
    /// Numbered in accept order: the first entries are the oldest.
    entries: BTreeMap<u64, Entry>,
    next: u64,
    /// Entries shed and not closed yet: they no longer count against the limit.
    shedding: usize,
}

#[derive(Debug)]
struct Entry {
    tracked: Arc<Tracked>,
    shedding: bool,
}

/// What the table shed, in the order of its preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shed {
    /// A connection whose peer never sent the preface: closed at once.
    NeverSpoken,
    /// A connection with no call in flight: GOAWAY, then closed.
    Idle,
}

/// A connection's place in the table, held by its task: dropping it (after the socket
/// is closed) removes the entry.
#[derive(Debug)]
pub(crate) struct Admitted {
    table: Arc<ConnectionTable>,
    id: u64,
    tracked: Arc<Tracked>,
}

impl Admitted {
    /// What the table knows of this connection.
    pub(crate) fn tracked(&self) -> &Arc<Tracked> {
        &self.tracked
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut live = self.table.live.lock();
        if let Some(entry) = live.entries.remove(&self.id)
            && entry.shedding
        {
            live.shedding -= 1;
        }
        drop(live);
        self.tracked.closed.cancel();
    }
}

impl ConnectionTable {
    /// A table that keeps at most `limit` connections (at least 1).
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit: limit.max(1),
            live: Mutex::default(),
            shed_never_spoken: AtomicU64::new(0),
            shed_idle: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// Admits a connection just accepted, shedding another if the table is full;
    /// `None` when it is full of connections carrying calls: the new one must be
    /// closed.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut live = self.live.lock();
        if live.entries.len() - live.shedding >= self.limit && self.shed(&mut live).is_none() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let id = live.next;
        live.next += 1;
        let tracked = Arc::new(Tracked::default());
        let entry = Entry {
            tracked: tracked.clone(),
            shedding: false,
        };
        live.entries.insert(id, entry);
        Some(Admitted {
            table: self.clone(),
            id,
            tracked,
        })
    }

    /// Sheds one connection to free its descriptor (`accept` lacked one); a token
    /// cancelled once its socket is closed, `None` when there is nothing to shed.
    pub(crate) fn shed_one(&self) -> Option<CancellationToken> {
        let mut live = self.live.lock();
        self.shed(&mut live)
    }

    /// When `max` or more shed connections are still open: the token of the oldest
    /// one's close, to wait on before accepting more. `None` below `max`.
    pub(crate) fn closing_backlog(&self, max: usize) -> Option<CancellationToken> {
        let live = self.live.lock();
        if live.shedding < max {
            return None;
        }
        let mut shed = live.entries.values().filter(|entry| entry.shedding);
        shed.next().map(|entry| entry.tracked.closed.clone())
    }

    /// Connections shed so far: never spoken, and idle; new connections refused.
    pub(crate) fn tallies(&self) -> (u64, u64, u64) {
        (
            self.shed_never_spoken.load(Ordering::Relaxed),
            self.shed_idle.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }

    /// Picks the connection to shed (see the module documentation), tells it to go and
    /// stops counting it; the token of its close.
    fn shed(&self, live: &mut Live) -> Option<CancellationToken> {
        let (id, shed) = pick(&live.entries)?;
        let entry = live.entries.get_mut(&id)?;
        entry.shedding = true;
        entry.tracked.shed.cancel();
        let closed = entry.tracked.closed.clone();
        live.shedding += 1;
        let tally = match shed {
            Shed::NeverSpoken => &self.shed_never_spoken,
            Shed::Idle => &self.shed_idle,
        };
        tally.fetch_add(1, Ordering::Relaxed);
        Some(closed)
    }
}

/// The oldest connection that never spoke, else the oldest with no call in flight,
/// among those neither shed already nor closing by themselves.
fn pick(entries: &BTreeMap<u64, Entry>) -> Option<(u64, Shed)> {
    let mut oldest_idle = None;
    let candidates = entries
        .iter()
        .filter(|(_, entry)| !entry.shedding && !entry.tracked.leaving.load(Ordering::Acquire));
    for (&id, entry) in candidates {
        if !entry.tracked.progress.sent_preface() {
            return Some((id, Shed::NeverSpoken));
        }
        if oldest_idle.is_none() && entry.tracked.peer.calls_in_flight() == 0 {
            oldest_idle = Some(id);
        }
    }
    oldest_idle.map(|id| (id, Shed::Idle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::PREFACE;

    /// A connection admitted into `table` whose peer sent the preface when `spoke`.
    fn admit(table: &Arc<ConnectionTable>, spoke: bool) -> Option<Admitted> {
        let admitted = table.admit()?;
        if spoke {
            admitted.tracked().progress.note(PREFACE.len());
        }
        Some(admitted)
    }

    fn is_shed(admitted: &Admitted) -> bool {
        admitted.tracked().shed.is_cancelled()
    }

    #[test]
    fn the_oldest_silent_go_first_then_the_oldest_idle_then_the_newcomer() {
        let table = ConnectionTable::new(4);
        let busy = admit(&table, true).unwrap();
        let _call = busy.tracked().peer.call_for_test();
        let idle = admit(&table, true).unwrap();
        let silent_old = admit(&table, false).unwrap();
        let silent_new = admit(&table, false).unwrap();

        // Full: each newcomer (who then calls) pushes out the oldest silent one.
        let second = admit(&table, true).unwrap();
        let _second_call = second.tracked().peer.call_for_test();
        assert!(is_shed(&silent_old) && !is_shed(&silent_new));
        let third = admit(&table, true).unwrap();
        let _third_call = third.tracked().peer.call_for_test();
        assert!(is_shed(&silent_new));
        assert!(!is_shed(&idle), "silent ones go before an idle one");

        // No silent one left: the oldest without a call goes.
        let fourth = admit(&table, true).unwrap();
        let _fourth_call = fourth.tracked().peer.call_for_test();
        assert!(is_shed(&idle));
        assert!(!is_shed(&busy) && !is_shed(&second) && !is_shed(&third));

        // Every connection carries a call: the newcomer is refused.
        assert!(admit(&table, false).is_none());
        assert_eq!(table.tallies(), (2, 1, 1));

        // A connection that left makes room again.
        drop(busy);
        assert!(admit(&table, false).is_some());
    }

    #[test]
    fn shed_connections_count_until_closed_but_not_against_the_limit() {
        let table = ConnectionTable::new(1);
        let silent = admit(&table, false).unwrap();
        let closed = table.shed_one().expect("a silent connection to shed");
        assert!(is_shed(&silent));
        assert!(table.shed_one().is_none(), "it is shed once");
        let closing = admit(&table, true).expect("room made by the shed one");
        closing.tracked().leave();
        assert!(
            table.shed_one().is_none(),
            "a connection closing by itself is not shed"
        );
        drop(closing);
        let newcomer = admit(&table, false).expect("room made by the shed one");
        assert!(!closed.is_cancelled(), "not closed before its task lets go");
        assert!(table.closing_backlog(2).is_none(), "one shed, still open");
        let oldest = table.closing_backlog(1).expect("one shed, still open");
        drop(silent);
        assert!(closed.is_cancelled() && oldest.is_cancelled());
        assert!(table.closing_backlog(1).is_none());
        assert_eq!(table.live.lock().entries.len(), 1);
        drop(newcomer);
        assert!(table.live.lock().entries.is_empty());
        assert_eq!(table.live.lock().shedding, 0);
    }
}
