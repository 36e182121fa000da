//! One upgrade run: what its steps share (the setup, the new process once started, the
//! report so far) and the body of each step before the hand-over. The order of the
//! steps is `Lifecycle::run_upgrade` in `mod.rs`.

use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Handoff, Setup, Successor, UpgradeReport, UpgradeResult};
use crate::sequence::Steps;
use crate::step::{StepOutcome, UpgradeStep};

/// One run: what the steps share.
pub(super) struct Run {
    pub(super) setup: Setup,
    /// Cancelled by a shutdown before the hand-over.
    pub(super) cancel: CancellationToken,
    pub(super) successor: Option<Box<dyn Successor>>,
    pub(super) spawned_at: Option<Instant>,
    pub(super) report: UpgradeReport,
}

impl Run {
    pub(super) fn new(setup: Setup, cancel: CancellationToken) -> Self {
        Self {
            setup,
            cancel,
            successor: None,
            spawned_at: None,
            report: UpgradeReport {
                result: UpgradeResult::Failed,
                reason: None,
                refusal: None,
                new_pid: None,
                time_to_ready: None,
                steps: Vec::new(),
                total: Duration::ZERO,
            },
        }
    }

    /// Step 1.
    pub(super) async fn announce(&mut self) -> StepOutcome {
        // The path that will run: `upgrade.binary`, or this process's own executable
        // (which `upgrade.binary` unset means).
        match self.setup.spawner.binary() {
            Some(binary) => tracing::info!(binary = %binary.display(), "upgrade started"),
            None => tracing::info!("upgrade started"),
        }
        if let Some(listener) = &self.setup.listener {
            listener.started();
        }
        StepOutcome::Completed
    }

    /// Step 2, bounded by `ready_timeout` and cut short by a shutdown.
    pub(super) async fn check(&mut self) -> StepOutcome {
        let bound = self.setup.config.ready_timeout;
        let spawner = self.setup.spawner.clone();
        tokio::select! {
            _ = self.cancel.cancelled() => self.fail(StepOutcome::Skipped, "shutdown requested".to_owned()),
            checked = tokio::time::timeout(bound, spawner.check()) => match checked {
                Ok(Ok(())) => StepOutcome::Completed,
                Ok(Err(reason)) => self.fail(StepOutcome::Failed, reason),
                Err(_) => self.fail(
                    StepOutcome::TimedOut,
                    format!("the configuration check did not finish within {bound:?} (upgrade.ready_timeout)"),
                ),
            },
        }
    }

    /// Step 3.
    pub(super) async fn spawn(&mut self, handoff: Result<Handoff, String>) -> StepOutcome {
        let spawner = &self.setup.spawner;
        let started = handoff.and_then(|mut handoff| {
            spawner.complete(&mut handoff)?;
            spawner.spawn(handoff)
        });
        match started {
            Ok(successor) => {
                tracing::info!(pid = successor.pid(), "new process started");
                self.report.new_pid = Some(successor.pid());
                self.spawned_at = Some(Instant::now());
                self.successor = Some(successor);
                StepOutcome::Completed
            }
            Err(reason) => self.fail(StepOutcome::Failed, reason),
        }
    }

    /// Step 4, bounded by `ready_timeout` and cut short by a shutdown.
    pub(super) async fn wait_ready(&mut self) -> StepOutcome {
        let bound = self.setup.config.ready_timeout;
        let Some(successor) = self.successor.as_mut() else {
            return StepOutcome::Failed;
        };
        let pid = successor.pid();
        let outcome = tokio::select! {
            _ = self.cancel.cancelled() => Err((StepOutcome::Skipped, "shutdown requested before the new process was ready".to_owned())),
            ready = tokio::time::timeout(bound, successor.ready()) => match ready {
                Ok(Ok(())) => Ok(()),
                Ok(Err(reason)) => Err((StepOutcome::Failed, reason)),
                Err(_) => Err((
                    StepOutcome::TimedOut,
                    format!("the new process {pid} was not ready within {bound:?} (upgrade.ready_timeout)"),
                )),
            },
        };
        match outcome {
            Ok(()) => {
                self.report.time_to_ready = self.spawned_at.map(|at| at.elapsed());
                tracing::info!(pid, time_to_ready = ?self.report.time_to_ready, "new process ready");
                StepOutcome::Completed
            }
            Err((outcome, reason)) => self.fail(outcome, reason),
        }
    }

    /// Records why the run failed; returns `outcome`.
    pub(super) fn fail(&mut self, outcome: StepOutcome, reason: String) -> StepOutcome {
        self.report.reason = Some(reason);
        outcome
    }

    /// Adds the new process's stderr tail to the reason, unless it is there already.
    pub(super) fn add_reason_detail(&mut self, tail: &str) {
        let reason = self.report.reason.get_or_insert_with(String::new);
        if !tail.is_empty() && !reason.contains(tail) {
            reason.push_str(": ");
            reason.push_str(tail);
        }
    }

    /// The report, with the steps taken so far.
    pub(super) fn finish(&self, steps: &Steps<'_, UpgradeStep>) -> UpgradeReport {
        UpgradeReport {
            steps: steps.taken(),
            total: steps.elapsed(),
            ..self.report.clone()
        }
    }
}
