//! What the calls on one connection and the connection's task share: the streams
//! admitted on it (backpressure at the peer's stream limit), whether the peer is
//! heard from, and the PINGs that check it.
//!
//! **Streams.** h2 queues a stream over the peer's `SETTINGS_MAX_CONCURRENT_STREAMS`
//! inside the connection, unbounded and invisible: a call queued there looks sent, and
//! one still queued at its timeout failed as "may have run" though it never left. So
//! a call takes a stream *permit* here first, as many as the peer allows, and waits
//! for one in the open: it is counted in its instance's calls in flight meanwhile, so
//! P2C sends new calls elsewhere, and a call that times out while waiting certainly
//! was not sent. The peer's limit is read from h2 until the first response arrived (the
//! peer's SETTINGS precede it) and kept then, read again whenever the count reaches
//! it: a peer that lowers its limit later has the excess queued by h2 until the count
//! next reaches the value kept.
//!
//! **Liveness.** Every read of the socket that brings bytes counts as *heard*
//! (`heard.rs`). A call whose answer is overdue asks for a probe; the connection's task
//! sends one PING for all of them and records the round's end: a round *started*
//! after a caller asked and answered (or with bytes heard meanwhile) proves the peer
//! alive to that caller. A PING unanswered in time ends the connection: `dead` is set,
//! and every waiter is woken.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Whether a connection's peer proved alive when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// The peer answered a PING sent after the question (or sent bytes meanwhile).
    Alive,
    /// The peer did not answer in time: the connection was closed. Calls still open on
    /// it fail; those whose stream never opened are not sent.
    Unresponsive,
}

/// The state one connection shares between its calls and its task.
#[derive(Debug)]
pub(super) struct Link {
    /// Reads that brought bytes from the peer (see `heard.rs`).
    heard: AtomicU64,
    /// Stream permits taken and not returned.
    streams: AtomicUsize,
    /// The peer's stream limit once learned (0 before): read from h2 when the first
    /// response arrived, since the peer's SETTINGS come before any response, and again
    /// whenever the count reaches it (reading it takes h2's connection lock, which a
    /// call need not take otherwise).
    stream_limit: AtomicUsize,
    /// Woken (one waiter per returned permit) when a permit is returned.
    freed: Notify,
    /// Asks the connection's task for a probe (a permit is stored if it is busy).
    probe_asked: Notify,
    /// Probe rounds begun, and the last one that proved the peer alive.
    rounds_begun: AtomicU64,
    rounds_alive: AtomicU64,
    /// Woken when a round ends or the connection dies.
    probed: Notify,
    /// Set once the connection ended.
    dead: AtomicBool,
    /// Set when it ended because a PING went unanswered.
    unresponsive: AtomicBool,
}

impl Link {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            heard: AtomicU64::new(0),
            streams: AtomicUsize::new(0),
            stream_limit: AtomicUsize::new(0),
            freed: Notify::new(),
            probe_asked: Notify::new(),
            rounds_begun: AtomicU64::new(0),
            rounds_alive: AtomicU64::new(0),
            probed: Notify::new(),
            dead: AtomicBool::new(false),
            unresponsive: AtomicBool::new(false),
        })
    }

    /// Counts one read that brought bytes.
    pub(super) fn note_heard(&self) {
        self.heard.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads that brought bytes so far.
    pub(super) fn heard(&self) -> u64 {
        self.heard.load(Ordering::Relaxed)
    }

    /// Stream permits out now.
    pub(super) fn open_streams(&self) -> usize {
        self.streams.load(Ordering::Relaxed)
    }

    pub(super) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// A stream permit, waiting while the peer's limit is reached; `None` once the
    /// connection died. `limit` reads the peer's current limit from h2; `waiting`
    /// counts this call while it waits.
    pub(super) async fn admit(
        self: &Arc<Self>,
        limit: impl Fn() -> usize,
        waiting: &AtomicUsize,
    ) -> Option<StreamPermit> {
        if self.try_admit(&limit) {
            return Some(StreamPermit { link: self.clone() });
        }
        waiting.fetch_add(1, Ordering::Relaxed);
        let _counted = Counted(waiting);
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.is_dead() {
                return None;
            }
            if self.try_admit(&limit) {
                return Some(StreamPermit { link: self.clone() });
            }
            freed.await;
        }
    }

    fn try_admit(&self, limit: &impl Fn() -> usize) -> bool {
        let mut current = self.streams.load(Ordering::Relaxed);
        let mut known = self.stream_limit.load(Ordering::Relaxed);
        loop {
            if known == 0 || current >= known {
                // Not learned yet, or reached: h2's own value (the peer may have raised it).
                let now = limit();
                if known != 0 {
                    self.stream_limit.store(now.max(1), Ordering::Relaxed);
                }
                known = now;
                if current >= now {
                    return false;
                }
            }
            match self.streams.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// Learns the peer's stream limit, `limit` reading it from h2, once a response has
    /// come (so its SETTINGS have been read); at most once.
    pub(super) fn learn_stream_limit(&self, limit: impl FnOnce() -> usize) {
        if self.stream_limit.load(Ordering::Relaxed) == 0 {
            self.stream_limit.store(limit().max(1), Ordering::Relaxed);
        }
    }

    /// Asks the connection's task to check the peer, and waits for a round begun
    /// after asking.
    pub(super) async fn probe(&self) -> Liveness {
        let probed = self.probed.notified();
        tokio::pin!(probed);
        probed.as_mut().enable();
        let wanted = self.rounds_begun.load(Ordering::Acquire) + 1;
        self.probe_asked.notify_one();
        loop {
            if self.rounds_alive.load(Ordering::Acquire) >= wanted {
                return Liveness::Alive;
            }
            if self.is_dead() {
                return Liveness::Unresponsive;
            }
            probed.as_mut().await;
            probed.set(self.probed.notified());
            probed.as_mut().enable();
        }
    }

    /// Resolves when a call asks for a probe (at once if one asked meanwhile).
    pub(super) async fn probe_asked(&self) {
        self.probe_asked.notified().await;
    }

    /// Notes the start of a probe round; its number.
    pub(super) fn begin_round(&self) -> u64 {
        self.rounds_begun.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Round `round` proved the peer alive: its waiters are told.
    pub(super) fn round_alive(&self, round: u64) {
        self.rounds_alive.fetch_max(round, Ordering::AcqRel);
        self.probed.notify_waiters();
    }

    /// Whether the connection was closed because a PING went unanswered.
    pub(super) fn was_unresponsive(&self) -> bool {
        self.unresponsive.load(Ordering::Acquire)
    }

    /// A PING went unanswered: the connection is about to be closed for it.
    pub(super) fn mark_unresponsive(&self) {
        self.unresponsive.store(true, Ordering::Release);
    }

    /// The connection ended: every waiter is told, and no permit is given again.
    pub(super) fn died(&self) {
        self.dead.store(true, Ordering::Release);
        self.probed.notify_waiters();
        self.freed.notify_waiters();
    }
}

/// Uncounts a waiting call when dropped (admitted, or given up).
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One admitted stream; returns its permit when dropped (the stream ended).
#[derive(Debug)]
pub(super) struct StreamPermit {
    link: Arc<Link>,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.link.streams.fetch_sub(1, Ordering::AcqRel);
        self.link.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stream_over_the_limit_waits_for_a_permit() {
        let link = Link::new();
        let first = link.admit(|| 2, &AtomicUsize::new(0)).await.unwrap();
        let _second = link.admit(|| 2, &AtomicUsize::new(0)).await.unwrap();
        let third = tokio::spawn({
            let link = link.clone();
            async move { link.admit(|| 2, &AtomicUsize::new(0)).await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!third.is_finished(), "waits while two are open");
        drop(first);
        assert!(third.await.unwrap(), "admitted once one ended");
    }

    #[tokio::test(start_paused = true)]
    async fn the_peers_current_limit_is_what_admits() {
        let link = Link::new();
        let _first = link.admit(|| 3, &AtomicUsize::new(0)).await.unwrap();
        let _second = link.admit(|| 3, &AtomicUsize::new(0)).await.unwrap();
        assert_eq!(link.open_streams(), 2);
        let limit = AtomicUsize::new(2);
        let waiting = AtomicUsize::new(0);
        let third = link.admit(|| limit.load(Ordering::Relaxed), &waiting);
        tokio::pin!(third);
        assert!(
            futures_util::poll!(third.as_mut()).is_pending(),
            "lowered to 2"
        );
        assert_eq!(waiting.load(Ordering::Relaxed), 1, "counted while it waits");
        limit.store(3, Ordering::Relaxed);
        drop(_first);
        assert!(third.await.is_some());
        assert_eq!(waiting.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_released_when_the_connection_dies() {
        let link = Link::new();
        let _first = link.admit(|| 1, &AtomicUsize::new(0)).await.unwrap();
        let waiting = tokio::spawn({
            let link = link.clone();
            async move { link.admit(|| 1, &AtomicUsize::new(0)).await.is_none() }
        });
        let probing = tokio::spawn({
            let link = link.clone();
            async move { link.probe().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        link.died();
        assert!(waiting.await.unwrap());
        assert_eq!(probing.await.unwrap(), Liveness::Unresponsive);
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_round_begun_after_the_question_answers_it() {
        let link = Link::new();
        let round_before = link.begin_round();
        let probing = tokio::spawn({
            let link = link.clone();
            async move { link.probe().await }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        link.round_alive(round_before);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            !probing.is_finished(),
            "that round began before the question"
        );
        link.probe_asked().await;
        let round = link.begin_round();
        link.round_alive(round);
        assert_eq!(probing.await.unwrap(), Liveness::Alive);
    }
}
