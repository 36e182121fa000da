//! Bounds of the shutdown sequence: the whole `timeout`, each step's bound, and the
//! second-signal interrupt, combined in one wait helper.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::StepOutcome;

/// The end of the whole sequence plus the interrupt token.
pub(crate) struct Deadline {
    end: Instant,
    force: CancellationToken,
}

impl Deadline {
    pub(crate) fn new(total: Duration, force: CancellationToken) -> Self {
        Self {
            end: Instant::now() + total,
            force,
        }
    }

    /// The end of the whole sequence.
    pub(crate) fn end(&self) -> Instant {
        self.end
    }

    /// `now + bound`, but never past the end of the whole sequence.
    pub(crate) fn bound(&self, bound: Duration) -> Instant {
        (Instant::now() + bound).min(self.end)
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
