//! The bookkeeping every step of a lifecycle sequence shares, in one place: enter the
//! step's phase, open a `tracing` span named for the step, time it, and record how it
//! ended. The sequence itself (`run_shutdown`, `run_upgrade`) is then only the
//! list of its steps, and no step can forget to move the phase or to be reported.
//! What a step is (its name, span and phase) is `step.rs`.

use std::future::Future;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tracing::Instrument;

use rpc_core::{PhaseCell, StepSpan};

use crate::step::{SequenceStep, StepOutcome, StepReport};

/// The steps one run of a sequence has taken, in order, with how long each took and how
/// it ended; it moves the application's phase as each step begins.
pub(crate) struct Steps<'a, S> {
    phase: &'a PhaseCell,
    /// Holds the running step's span for the provider filter (a call a step refuses or
    /// moves is linked to it).
    step_span: &'a StepSpan,
    started: Instant,
    /// Shared with observers (metrics, the admin endpoint), who read the steps taken so
    /// far while the sequence runs.
    taken: &'a Mutex<Vec<StepReport<S>>>,
}

impl<'a, S: SequenceStep> Steps<'a, S> {
    /// A sequence starting now (tokio's clock), moving `phase`, showing each running
    /// step's span in `step_span`, and writing each step's report into `taken` as the
    /// step ends (what it held before is cleared).
    pub(crate) fn new(
        phase: &'a PhaseCell,
        step_span: &'a StepSpan,
        taken: &'a Mutex<Vec<StepReport<S>>>,
    ) -> Self {
        taken.lock().clear();
        Self {
            phase,
            step_span,
            started: Instant::now(),
            taken,
        }
    }

    /// Runs `body` as `step`: enters the step's phase, then awaits `body` inside the
    /// step's span, and records its duration and outcome, which it returns. `body` is a
    /// future not yet polled, so none of it runs before the phase has moved.
    pub(crate) async fn run(
        &mut self,
        step: S,
        body: impl Future<Output = StepOutcome>,
    ) -> StepOutcome {
        let span = step.span();
        // Before the phase moves: a call the new phase refuses finds the step's span.
        self.step_span.began(&span);
        // Inside the span, so the "phase changed" log is attributed to the step.
        span.in_scope(|| self.phase.advance(step.phase()));
        let started = Instant::now();
        let outcome = body.instrument(span.clone()).await;
        self.step_span.ended();
        span.record("outcome", tracing::field::debug(outcome));
        self.taken.lock().push(StepReport {
            step,
            duration: started.elapsed(),
            outcome,
        });
        outcome
    }

    /// Time since the sequence started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The steps taken so far, in order.
    pub(crate) fn taken(&self) -> Vec<StepReport<S>>
    where
        S: Clone,
    {
        self.taken.lock().clone()
    }

    /// The steps taken, in order.
    pub(crate) fn into_reports(self) -> Vec<StepReport<S>>
    where
        S: Clone,
    {
        self.taken.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use rpc_core::Phase;

    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Demo {
        Close,
    }

    impl fmt::Display for Demo {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("close")
        }
    }

    impl SequenceStep for Demo {
        fn phase(self) -> Phase {
            Phase::Destroying
        }

        fn span(self) -> tracing::Span {
            tracing::info_span!("close", outcome = tracing::field::Empty)
        }
    }

    /// The phase has moved before the body runs; the step is timed on tokio's clock.
    #[tokio::test(start_paused = true)]
    async fn a_step_enters_its_phase_first_then_is_timed_and_recorded() {
        let cell = PhaseCell::new("t".into());
        let reader = cell.reader();
        let taken = Mutex::new(Vec::new());
        let step_span = StepSpan::new();
        let mut steps = Steps::new(&cell, &step_span, &taken);
        steps
            .run(Demo::Close, async {
                assert_eq!(reader.get(), Phase::Destroying);
                tokio::time::sleep(Duration::from_millis(30)).await;
                StepOutcome::TimedOut
            })
            .await;
        assert_eq!(steps.elapsed(), Duration::from_millis(30));
        let reports = steps.into_reports();
        assert_eq!(reports, *taken.lock(), "observers see the same steps");
        assert_eq!(
            reports,
            [StepReport {
                step: Demo::Close,
                duration: Duration::from_millis(30),
                outcome: StepOutcome::TimedOut,
            }]
        );
    }
}
