//! The bounds of one run of a sequence (the shutdown, or the old process's drain after a
//! hot upgrade): the whole `timeout`, the part of it kept for the callbacks, each step's
//! `step_timeout`, and the second-signal interrupt, combined in one wait helper.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::step::StepOutcome;

/// The end of steps 1 to 6, the time kept for step 7, each step's bound, and the
/// interrupt token.
pub(crate) struct SequenceBounds {
    /// `timeout - callbacks` after the start: steps 1 to 6 end by then.
    end: Instant,
    /// What step 7 gets, whenever it begins.
    callbacks: Duration,
    /// `step_timeout`: the bound of each drain and of closing connections.
    step: Duration,
    force: CancellationToken,
}

impl SequenceBounds {
    /// Bounds starting now: `total` for the whole sequence, of which `callbacks` (at
    /// most `total`) is kept for step 7; `step` for each step that waits.
    pub(crate) fn new(
        total: Duration,
        callbacks: Duration,
        step: Duration,
        force: CancellationToken,
    ) -> Self {
        let callbacks = callbacks.min(total);
        Self {
            end: Instant::now() + (total - callbacks),
            callbacks,
            step,
            force,
        }
    }

    /// When step 7, beginning now, must end: the time kept for it from now. Steps 1 to
    /// 6 ended by `timeout - callbacks`, so this is never past the end of `timeout`.
    pub(crate) fn callbacks_end(&self) -> Instant {
        Instant::now() + self.callbacks
    }

    /// `now + bound`, but never past the end of steps 1 to 6.
    pub(crate) fn bound(&self, bound: Duration) -> Instant {
        (Instant::now() + bound).min(self.end)
    }

    /// The end of a step beginning now: `step_timeout` from now, but never past the end
    /// of steps 1 to 6.
    pub(crate) fn step_end(&self) -> Instant {
        self.bound(self.step)
    }

    /// Whether a second signal asked to skip the rest.
    pub(crate) fn interrupted(&self) -> bool {
        self.force.is_cancelled()
    }

    /// Waits for `condition` until `bound`, or until interrupted, whichever is first.
    pub(crate) async fn wait<F: Future<Output = ()>>(
        &self,
        condition: F,
        bound: Instant,
    ) -> StepOutcome {
        tokio::select! {
            biased;
            _ = self.force.cancelled() => StepOutcome::Skipped,
            _ = condition => StepOutcome::Completed,
            _ = tokio::time::sleep_until(bound) => StepOutcome::TimedOut,
        }
    }
}
