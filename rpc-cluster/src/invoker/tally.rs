//! What one consumer sent to one instance: attempts, streams opened, failures, and when
//! (the counts `InvokerStats` reports and the lab tests read after a fault).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::Invoker;

/// What one consumer sent to one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvokerStats {
    /// Attempts made (each retry is one more), whether or not they reached the
    /// instance.
    pub dispatched: u64,
    /// Attempts whose HTTP/2 stream was opened on a connection to the instance: what
    /// may have reached it (an attempt with no connection, or none before it gave up,
    /// is not counted).
    pub sent: u64,
    /// Attempts that failed at the connection level, timed out or were refused.
    pub failures: u64,
    /// When the latest attempt was made.
    pub last_dispatch: Option<Instant>,
    /// When the latest attempt counted in `sent` was made.
    pub last_sent: Option<Instant>,
    /// When the current run of failures began (cleared by a success).
    pub failing_since: Option<Instant>,
}

/// When an attempt was made, as its invoker counts time (nanoseconds after it was
/// first seen, plus one): read from the clock once per attempt.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DispatchStamp(pub(super) u64);

impl Invoker {
    /// What this consumer sent to the instance so far.
    pub fn stats(&self) -> InvokerStats {
        InvokerStats {
            dispatched: self.dispatched.load(Ordering::Acquire),
            sent: self.sent.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_dispatch: self.instant(&self.last_dispatch),
            last_sent: self.instant(&self.last_sent),
            failing_since: self.instant(&self.failing_since),
        }
    }

    fn stamp(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.first_seen).as_nanos() as u64 + 1
    }

    fn instant(&self, stamp: &AtomicU64) -> Option<Instant> {
        match stamp.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.first_seen + Duration::from_nanos(n - 1)),
        }
    }

    /// Counts an attempt made at `at`; its time stamp, for the attempt's other notes.
    pub(crate) fn note_dispatch(&self, at: Instant) -> DispatchStamp {
        let stamp = self.stamp(at);
        // Release, read with Acquire: a reader that sees this attempt counted sees it in
        // flight too (`Invoker::start_call` comes first).
        self.dispatched.fetch_add(1, Ordering::Release);
        self.last_dispatch.store(stamp, Ordering::Relaxed);
        DispatchStamp(stamp)
    }

    /// The attempt of `stamp` opened its stream on a connection to the instance.
    pub(crate) fn note_sent(&self, stamp: DispatchStamp) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.last_sent.fetch_max(stamp.0, Ordering::Relaxed);
    }

    pub(crate) fn note_result(&self, failed: bool, at: Instant) {
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
            let _ = self.failing_since.compare_exchange(
                0,
                self.stamp(at),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        } else if self.failing_since.load(Ordering::Relaxed) != 0 {
            self.failing_since.store(0, Ordering::Relaxed);
        }
    }
}
