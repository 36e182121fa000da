//! The hot upgrade: a new binary takes over this instance on the same listening socket,
//! registry-aware, with no refused connection and no failed request.
//!
//! Read [`Lifecycle::run_upgrade`] top to bottom: it is the list of steps (trigger →
//! check → spawn → wait ready → hand over → drain → exit), each run by the step helper
//! the shutdown uses (`sequence.rs`: phase, span, timing, report). The mechanics of
//! processes and descriptors are not here: the sequence drives a [`Spawner`] (the real
//! one is `process::successor::ProcessSpawner`; tests use fakes), and hears nothing of
//! systemd, which an [`UpgradeListener`] is told about.
//!
//! What it does that pingora, ecdysis, shellflip, tableflip and nginx do not (see
//! DESIGN.md "Hot upgrade"): the old process goes on serving, untouched, until the new
//! one has *registered* and said ready, however long that takes (`ready_timeout`, any
//! value); a failed start leaves it serving; one upgrade at a time, and none while the
//! previous generation drains; and the old process never withdraws the instances the new
//! one now serves, nor lets its registry session take them away (`Registry::release`).

mod config;
mod gate;
mod handover;
mod report;
#[cfg(test)]
mod tests;

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use config::UpgradeConfig;
pub use report::{Refusal, UpgradeReport, UpgradeResult, UpgradeStep};

use super::sequence::{SequenceStep, Steps};
use super::{Lifecycle, Phase, ShutdownReport, StepOutcome, StepReport};
use crate::Instance;
use crate::transport::{GRPC_LISTENER, ListenFds};
pub(crate) use gate::{AtShutdown, UpgradeGate};

/// What the old process hands to the new one.
#[derive(Debug)]
pub struct Handoff {
    /// The listening sockets, named (`grpc`, and `admin` when the application adds it).
    pub listeners: ListenFds,
    /// The instances registered now: the new process registers the same ones (same ids).
    pub instances: Vec<Instance>,
}

/// Starts the new binary (the mechanics; `process::successor::ProcessSpawner` is the
/// real one).
#[async_trait]
pub trait Spawner: Send + Sync + 'static {
    /// Runs the new binary's configuration check (it loads and validates its
    /// configuration, starts nothing, and exits). Dropping the future must stop it.
    ///
    /// # Errors
    /// Why it failed, with the binary's own message.
    async fn check(&self) -> Result<(), String>;

    /// Starts the new binary with `handoff`.
    ///
    /// # Errors
    /// Why it could not be started.
    fn spawn(&self, handoff: Handoff) -> Result<Box<dyn Successor>, String>;

    /// Adds what only the application knows to `handoff` (e.g. the admin endpoint's
    /// listener) before [`Spawner::spawn`]. Default: nothing.
    ///
    /// # Errors
    /// Why it could not (the upgrade fails at its spawn step).
    fn complete(&self, _handoff: &mut Handoff) -> Result<(), String> {
        Ok(())
    }
}

/// A started new process.
#[async_trait]
pub trait Successor: Send {
    /// Its pid.
    fn pid(&self) -> u32;

    /// Resolves when it reports ready.
    ///
    /// # Errors
    /// Why it never will (it exited: with its status and the tail of its stderr).
    async fn ready(&mut self) -> Result<(), String>;

    /// Kills it and reaps it (no zombie); returns the tail of its standard error.
    async fn abandon(self: Box<Self>) -> String;

    /// It took over: returns what this process must keep until it exits (its end of the
    /// hand-over channel, whose closing tells the new process that its predecessor is
    /// gone).
    fn taken_over(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// Told about each upgrade's progress, synchronously from the sequence (systemd's
/// `RELOADING=1`, `MAINPID=` + `READY=1`, `READY=1`: see `rpc::systemd`).
pub trait UpgradeListener: Send + Sync + 'static {
    /// An upgrade began.
    fn started(&self) {}
    /// It failed: this process goes on serving.
    fn failed(&self) {}
    /// Process `pid` took over (called before this process stops accepting).
    fn handed_over(&self, _pid: u32) {}
}

/// How many upgrades this process ran, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpgradeCounts {
    /// Upgrades whose new process took over (at most one per process).
    pub succeeded: u64,
    /// Upgrades that failed (the process went on serving).
    pub failed: u64,
    /// Triggers refused.
    pub refused: u64,
    /// From the start of the last new process to its `ready`.
    pub last_time_to_ready: Option<Duration>,
}

/// How an upgrade is run: set by [`Lifecycle::configure_upgrade`].
#[derive(Clone)]
struct Setup {
    config: UpgradeConfig,
    spawner: Arc<dyn Spawner>,
    listener: Option<Arc<dyn UpgradeListener>>,
}

/// A lifecycle's upgrade state.
pub(crate) struct UpgradeState {
    pub(crate) gate: UpgradeGate,
    setup: Mutex<Option<Setup>>,
    /// The steps of the run under way (or the last), for observers.
    steps: Mutex<Vec<StepReport<UpgradeStep>>>,
    last: Mutex<Option<UpgradeReport>>,
    counts: Mutex<UpgradeCounts>,
    /// What the successor left this process to hold until it exits.
    kept: Mutex<Option<Box<dyn Any + Send>>>,
}

impl UpgradeState {
    pub(crate) fn new() -> Self {
        Self {
            gate: UpgradeGate::new(),
            setup: Mutex::new(None),
            steps: Mutex::new(Vec::new()),
            last: Mutex::new(None),
            counts: Mutex::new(UpgradeCounts::default()),
            kept: Mutex::new(None),
        }
    }
}

/// One run: what the steps share.
struct Run {
    setup: Setup,
    /// Cancelled by a shutdown before the hand-over.
    cancel: CancellationToken,
    successor: Option<Box<dyn Successor>>,
    spawned_at: Option<Instant>,
    report: UpgradeReport,
}

impl Lifecycle {
    /// Makes hot upgrades possible: how they are bounded (`config`), what starts the new
    /// binary (`spawner`), and who hears of their progress (`listener`). Until then every
    /// trigger is refused ([`Refusal::NotConfigured`]).
    pub fn configure_upgrade(
        &self,
        config: UpgradeConfig,
        spawner: Arc<dyn Spawner>,
        listener: Option<Arc<dyn UpgradeListener>>,
    ) {
        *self.inner.upgrade.setup.lock() = Some(Setup {
            config,
            spawner,
            listener,
        });
    }

    /// Starts a hot upgrade, unless one is under way, the previous generation still
    /// drains, or the application is not serving (then the report says why at once).
    /// Resolves when the outcome is decided: the new process took over (this one then
    /// drains and exits on its own: [`Lifecycle::wait`] returns its report), or the
    /// upgrade failed and this process goes on serving. The run is its own task:
    /// dropping the returned future does not stop it.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn upgrade(&self) -> impl Future<Output = UpgradeReport> + Send + 'static {
        let (decided, outcome) = oneshot::channel();
        let setup = self.inner.upgrade.setup.lock().clone();
        let claimed = match setup {
            None => Err(Refusal::NotConfigured),
            Some(setup) => self
                .inner
                .upgrade
                .gate
                .begin(self.phase())
                .map(|cancel| (setup, cancel)),
        };
        match claimed {
            Err(refusal) => {
                self.inner.upgrade.counts.lock().refused += 1;
                tracing::warn!(app = %self.name(), %refusal, "upgrade refused");
                let _ = decided.send(UpgradeReport::refused(refusal));
            }
            Ok((setup, cancel)) => {
                let this = self.clone();
                let span = tracing::info_span!("upgrade", app = %self.name());
                tokio::spawn(
                    async move { this.run_upgrade(setup, cancel, decided).await }.instrument(span),
                );
            }
        }
        async move {
            outcome.await.unwrap_or_else(|_| UpgradeReport {
                reason: Some("the upgrade task ended without a result".to_owned()),
                ..UpgradeReport::refused(Refusal::InProgress)
            })
        }
    }

    /// Marks this process as a new generation whose predecessor is alive until `gone`
    /// resolves: upgrades are refused meanwhile ([`Refusal::PredecessorDraining`]).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn predecessor_alive(&self, gone: impl Future<Output = ()> + Send + 'static) {
        self.inner.upgrade.gate.set_predecessor_alive(true);
        let this = self.clone();
        tokio::spawn(async move {
            gone.await;
            this.inner.upgrade.gate.set_predecessor_alive(false);
            tracing::info!(app = %this.name(), "the previous generation has exited");
        });
    }

    /// The report of the last upgrade decided (the final one, all steps, once this
    /// process handed over and drained).
    pub fn last_upgrade(&self) -> Option<UpgradeReport> {
        self.inner.upgrade.last.lock().clone()
    }

    /// The steps of the upgrade under way (or the last one), for observers.
    pub fn upgrade_steps(&self) -> Vec<StepReport<UpgradeStep>> {
        self.inner.upgrade.steps.lock().clone()
    }

    /// How many upgrades were run, failed and refused.
    pub fn upgrade_counts(&self) -> UpgradeCounts {
        *self.inner.upgrade.counts.lock()
    }

    /// The sequence. `decided` gets the report once the outcome is known.
    async fn run_upgrade(
        &self,
        setup: Setup,
        cancel: CancellationToken,
        decided: oneshot::Sender<UpgradeReport>,
    ) {
        let mut steps = Steps::new(&self.inner.phase, &self.inner.upgrade.steps);
        let mut run = Run::new(setup, cancel);

        // 1. Trigger: systemd hears that a reload began; every other trigger is refused
        //    until this run ends.
        steps.run(UpgradeStep::Trigger, run.announce()).await;
        // 2. Check: the new binary loads and validates its configuration, starting
        //    nothing. A bad one ends the upgrade here, with its own message.
        if !ok(steps.run(UpgradeStep::Check, run.check()).await) {
            return self.upgrade_failed(run, steps, decided).await;
        }
        // 3. Spawn: fork+exec with the listening sockets, the instances and the
        //    hand-over channel.
        let handoff = self.handoff();
        if !ok(steps.run(UpgradeStep::Spawn, run.spawn(handoff)).await) {
            return self.upgrade_failed(run, steps, decided).await;
        }
        // 4. The new process starts as any instance does (references, services on the
        //    inherited sockets, gates, registration of the same instances) and reports
        //    ready; not in `ready_timeout`, or exited: killed and reaped.
        if !ok(steps.run(UpgradeStep::WaitReady, run.wait_ready()).await) {
            return self.upgrade_failed(run, steps, decided).await;
        }
        // 5. Hand over: systemd's main pid moves to the new process; this one stops
        //    accepting (the socket stays open in the new one) and gives up its
        //    registrations without withdrawing them.
        if !ok(steps
            .run(UpgradeStep::HandOver, self.hand_over(&mut run))
            .await)
        {
            return self.upgrade_failed(run, steps, decided).await;
        }
        run.report.result = UpgradeResult::Succeeded;
        let _ = decided.send(run.finish(&steps));
        let deadline = self.deadline_from_now();
        let mut drained = ShutdownReport {
            handed_over_to: run.report.new_pid,
            ..ShutdownReport::default()
        };
        // 6. Drain: GOAWAY on every connection; requests and streams in flight finish
        //    (bounded as in the shutdown); references and registry clients close.
        steps
            .run(
                UpgradeStep::Drain,
                self.drain_handed_over(&deadline, &mut drained),
            )
            .await;
        // 7. Exit: the application's callbacks; then `wait()` returns, and `main`
        //    exits with the report's code.
        steps
            .run(
                UpgradeStep::Exit,
                self.exit_callbacks(&deadline, &mut drained),
            )
            .await;
        self.finish_handed_over(run, steps, drained);
    }

    /// The listening sockets and instances to hand to the new process.
    fn handoff(&self) -> Result<Handoff, String> {
        let mut listeners = ListenFds::new();
        for (index, server) in self.servers().iter().enumerate() {
            let fd = server.listener_fd().map_err(|error| {
                format!(
                    "cannot hand over the listener {}: {error}",
                    server.local_addr()
                )
            })?;
            let name = match index {
                0 => GRPC_LISTENER.to_owned(),
                n => format!("{GRPC_LISTENER}-{n}"),
            };
            listeners.listener(name, fd);
        }
        let mut instances = self.registrations();
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        instances.dedup_by(|a, b| a.id == b.id);
        Ok(Handoff {
            listeners,
            instances,
        })
    }

    /// Ends a failed run: the new process is gone (killed and reaped by the step that
    /// failed), this process goes on serving, and the next trigger may try again.
    async fn upgrade_failed(
        &self,
        mut run: Run,
        steps: Steps<'_, UpgradeStep>,
        decided: oneshot::Sender<UpgradeReport>,
    ) {
        if let Some(successor) = run.successor.take() {
            let tail = successor.abandon().await;
            run.add_reason_detail(&tail);
            // It may have registered our instances before it failed, moving them to its
            // session or lease, which ends with it: take them back.
            self.register_again().await;
        }
        run.report.result = UpgradeResult::Failed;
        self.inner.upgrade.gate.failed();
        if let Some(listener) = &run.setup.listener {
            listener.failed();
        }
        let report = run.finish(&steps);
        self.inner.upgrade.counts.lock().failed += 1;
        tracing::warn!(app = %self.name(), %report, "upgrade failed; this process goes on serving");
        *self.inner.upgrade.last.lock() = Some(report.clone());
        let _ = decided.send(report);
    }

    /// After the last step of a successful run: the final report is kept and logged,
    /// and the drain's report goes to [`Lifecycle::wait`].
    fn finish_handed_over(
        &self,
        run: Run,
        steps: Steps<'_, UpgradeStep>,
        mut drained: ShutdownReport,
    ) {
        let report = run.finish(&steps);
        drained.total = steps.elapsed();
        drained.rejected = self.inner.rejections.count();
        tracing::info!(app = %self.name(), %report, "upgrade finished; this process exits");
        *self.inner.upgrade.last.lock() = Some(report);
        self.advance(Phase::Stopped);
        self.inner.finished.send_replace(Some(drained));
    }
}

fn ok(outcome: StepOutcome) -> bool {
    outcome == StepOutcome::Completed
}

impl Run {
    fn new(setup: Setup, cancel: CancellationToken) -> Self {
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
    async fn announce(&mut self) -> StepOutcome {
        tracing::info!(binary = ?self.setup.config.binary, "upgrade started");
        if let Some(listener) = &self.setup.listener {
            listener.started();
        }
        StepOutcome::Completed
    }

    /// Step 2, bounded by `ready_timeout` and cut short by a shutdown.
    async fn check(&mut self) -> StepOutcome {
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
    async fn spawn(&mut self, handoff: Result<Handoff, String>) -> StepOutcome {
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
    async fn wait_ready(&mut self) -> StepOutcome {
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
    fn fail(&mut self, outcome: StepOutcome, reason: String) -> StepOutcome {
        self.report.reason = Some(reason);
        outcome
    }

    /// Adds the new process's stderr tail to the reason, unless it is there already.
    fn add_reason_detail(&mut self, tail: &str) {
        let reason = self.report.reason.get_or_insert_with(String::new);
        if !tail.is_empty() && !reason.contains(tail) {
            reason.push_str(": ");
            reason.push_str(tail);
        }
    }

    /// The report, with the steps taken so far.
    fn finish(&self, steps: &Steps<'_, UpgradeStep>) -> UpgradeReport {
        UpgradeReport {
            steps: steps.taken(),
            total: steps.elapsed(),
            ..self.report.clone()
        }
    }
}

/// A span per step, named as the report names it, with the `outcome` field
/// [`Steps::run`] fills.
macro_rules! step_span {
    ($name:literal) => {
        tracing::info_span!($name, outcome = tracing::field::Empty)
    };
}

impl SequenceStep for UpgradeStep {
    fn phase(self) -> Phase {
        match self {
            // The old process serves as before until the new one took over.
            UpgradeStep::Trigger
            | UpgradeStep::Check
            | UpgradeStep::Spawn
            | UpgradeStep::WaitReady => Phase::Serving,
            UpgradeStep::HandOver | UpgradeStep::Drain => Phase::HandedOver,
            UpgradeStep::Exit => Phase::Callbacks,
        }
    }

    fn span(self) -> tracing::Span {
        match self {
            UpgradeStep::Trigger => step_span!("trigger"),
            UpgradeStep::Check => step_span!("check"),
            UpgradeStep::Spawn => step_span!("spawn"),
            UpgradeStep::WaitReady => step_span!("wait-ready"),
            UpgradeStep::HandOver => step_span!("hand-over"),
            UpgradeStep::Drain => step_span!("drain"),
            UpgradeStep::Exit => step_span!("exit"),
        }
    }
}
