//! What one consumer's run came to, counted as it happens: its calls and how they
//! ended, and what the stand-ins it reached did with them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The counts of one consumer's run.
#[derive(Debug, Default)]
pub struct ConsumerTally {
    calls: AtomicU64,
    /// Calls that failed: their id and the status they ended with.
    failed: Mutex<Vec<(u64, String)>>,
    /// How many times each call's handler ran, for calls that ran more than never.
    executions: Mutex<HashMap<u64, u32>>,
    refused: AtomicU64,
    closing_marks: AtomicU64,
    dials_refused: AtomicU64,
}

impl ConsumerTally {
    /// A call was made.
    pub fn note_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Call `id` failed with `status`.
    pub fn note_failed(&self, id: u64, status: String) {
        self.failed.lock().push((id, status));
    }

    /// A stand-in's handler ran call `id`.
    pub fn executed(&self, id: u64) {
        *self.executions.lock().entry(id).or_default() += 1;
    }

    /// A stand-in refused a call "closing, not executed".
    pub fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A stand-in's response carried the closing mark.
    pub fn note_closing_mark(&self) {
        self.closing_marks.fetch_add(1, Ordering::Relaxed);
    }

    /// A dial found nothing listening.
    pub fn note_dial_refused(&self) {
        self.dials_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts, read once the run is over.
    pub fn summary(&self) -> TallySummary {
        let executions = self.executions.lock();
        TallySummary {
            calls: self.calls.load(Ordering::Relaxed),
            failed: self.failed.lock().clone(),
            executed_twice: executions.values().filter(|runs| **runs > 1).count() as u64,
            refused: self.refused.load(Ordering::Relaxed),
            closing_marks: self.closing_marks.load(Ordering::Relaxed),
            dials_refused: self.dials_refused.load(Ordering::Relaxed),
        }
    }
}

/// The counts of one or many consumers' runs.
#[derive(Clone, Debug, Default)]
pub struct TallySummary {
    /// Calls made.
    pub calls: u64,
    /// Calls that failed (id, status).
    pub failed: Vec<(u64, String)>,
    /// Calls whose handler ran more than once.
    pub executed_twice: u64,
    /// Calls refused "closing, not executed" (each re-sent by the consumer).
    pub refused: u64,
    /// Responses that carried the closing mark.
    pub closing_marks: u64,
    /// Dials that found nothing listening.
    pub dials_refused: u64,
}

impl TallySummary {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: TallySummary) {
        self.calls += other.calls;
        self.failed.extend(other.failed);
        self.executed_twice += other.executed_twice;
        self.refused += other.refused;
        self.closing_marks += other.closing_marks;
        self.dials_refused += other.dials_refused;
    }
}
