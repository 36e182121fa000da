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
mod early_steps;
mod gate;
mod process_api;
mod retire;
#[cfg(test)]
mod tests;
mod upgrade_report;

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use config::UpgradeConfig;
use early_steps::Run;
pub(crate) use gate::{AtShutdown, UpgradeGate};
pub use process_api::{Handoff, Spawner, Successor, UpgradeListener};
use rpc_transport::{GRPC_LISTENER, ListenFds};
pub use upgrade_report::{Refusal, UpgradeReport, UpgradeResult};

use crate::sequence::Steps;
use crate::shutdown::steps::run_callbacks;
use crate::step::{StepOutcome, StepReport, UpgradeStep};
use crate::{Lifecycle, Phase, ShutdownReport};

/// How many upgrades this process ran, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpgradeCounts {
    /// Upgrades whose new process took over (at most one per process).
    pub succeeded: u64,
    /// Upgrades that failed (the process went on serving).
    pub failed: u64,
    /// Triggers refused.
    pub refused: u64,
    /// Upgrades cut short by the shutdown.
    pub cancelled: u64,
    /// From the start of the last new process to its `ready`.
    pub last_time_to_ready: Option<Duration>,
}

/// What asked for an upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// SIGUSR2 (`signals.rs`).
    Signal,
    /// A call of [`Lifecycle::upgrade`] (the admin endpoint, the application).
    Call,
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

impl Lifecycle {
    /// Makes hot upgrades possible: how they are bounded (`config`), what starts the new
    /// binary (`spawner`), and who hears of their progress (`listener`). Until then every
    /// trigger is refused ([`Refusal::NotConfigured`]); with `config.enabled` false,
    /// every trigger is refused as [`Refusal::Disabled`].
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

    /// Starts a hot upgrade, unless the upgrade is turned off (`upgrade.enabled`), one
    /// is under way, the previous generation still drains, or the application is not
    /// serving (then the report says why at once).
    /// Resolves when the outcome is decided: the new process took over (this one then
    /// drains and exits on its own: [`Lifecycle::wait`] returns its report), or the
    /// upgrade failed and this process goes on serving. The run is its own task:
    /// dropping the returned future does not stop it.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn upgrade(&self) -> impl Future<Output = UpgradeReport> + Send + 'static {
        self.trigger_upgrade(Trigger::Call)
    }

    /// [`Lifecycle::upgrade`] for a SIGUSR2: a refusal is also told to the
    /// [`UpgradeListener`] (a service manager that sent the signal may be waiting).
    pub(crate) fn upgrade_by_signal(&self) -> impl Future<Output = UpgradeReport> + Send + 'static {
        self.trigger_upgrade(Trigger::Signal)
    }

    /// Whether SIGUSR2 is to be ignored: the upgrade is on but `upgrade.signal` is off
    /// (read, with `internal_signal` on, only so that its default action does not end
    /// the process).
    pub(crate) fn upgrade_signal_ignored(&self) -> bool {
        self.inner
            .upgrade
            .setup
            .lock()
            .as_ref()
            .is_some_and(|setup| setup.config.enabled && !setup.config.signal)
    }

    /// Whether SIGUSR2 starts an upgrade: it is enabled and `upgrade.signal` is on.
    /// Start-up handles SIGUSR2 then, whatever `internal_signal` says.
    pub(crate) fn upgrade_by_signal_enabled(&self) -> bool {
        self.inner
            .upgrade
            .setup
            .lock()
            .as_ref()
            .is_some_and(|setup| setup.config.enabled && setup.config.signal)
    }

    fn trigger_upgrade(
        &self,
        trigger: Trigger,
    ) -> impl Future<Output = UpgradeReport> + Send + 'static {
        let (decided, outcome) = oneshot::channel();
        let setup = self.inner.upgrade.setup.lock().clone();
        let claimed = match setup {
            None => Err((Refusal::NotConfigured, None)),
            Some(setup) => match self.claim_upgrade(&setup.config) {
                Ok(cancel) => Ok((setup, cancel)),
                Err(refusal) => Err((refusal, setup.listener)),
            },
        };
        match claimed {
            Ok((setup, cancel)) => {
                let this = self.clone();
                let span = tracing::info_span!("upgrade", app = %self.name());
                tokio::spawn(
                    async move { this.run_upgrade(setup, cancel, decided).await }.instrument(span),
                );
            }
            Err((refusal, listener)) => {
                self.inner.upgrade.counts.lock().refused += 1;
                tracing::warn!(app = %self.name(), %refusal, "upgrade refused");
                if let (Trigger::Signal, Some(listener)) = (trigger, listener) {
                    listener.signal_refused(refusal);
                }
                let _ = decided.send(UpgradeReport::refused(refusal));
            }
        }
        async move {
            outcome.await.unwrap_or_else(|_| UpgradeReport {
                reason: Some("the upgrade task ended without a result".to_owned()),
                ..UpgradeReport::refused(Refusal::InProgress)
            })
        }
    }

    /// The right to run an upgrade (its cancellation token), or why not.
    ///
    /// Claimed under the lock manual offline and online take: an upgrade never begins
    /// while one of them moves registrations, and from here until the run is decided
    /// they are refused (`traffic.rs`). So "is this instance online" has one owner at a
    /// time, and the hand-over carries the operator's last word — a service manually
    /// offline starts offline in the new process (see [`Handoff::offline`]).
    fn claim_upgrade(&self, config: &UpgradeConfig) -> Result<CancellationToken, Refusal> {
        if !config.enabled {
            return Err(Refusal::Disabled);
        }
        let Some(_no_traffic_change) = self.inner.registrations.try_one_change() else {
            return Err(Refusal::TrafficChanging);
        };
        self.inner.upgrade.gate.begin(self.phase())
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
        let mut steps = Steps::new(
            &self.inner.phase,
            self.inner.streams.step_span(),
            &self.inner.upgrade.steps,
        );
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
        let bounds = self.bounds_from_now();
        let mut drained = ShutdownReport {
            handed_over_to: run.report.new_pid,
            ..ShutdownReport::default()
        };
        // 6. Drain: GOAWAY on every connection; requests and streams in flight finish
        //    (bounded as in the shutdown); references and registry clients close.
        let drain = self.drain_handed_over(&bounds, &mut drained);
        steps.run(UpgradeStep::Drain, drain).await;
        // 7. Exit: the application's callbacks; then `wait()` returns, and `main`
        //    exits with the report's code.
        let callbacks = run_callbacks(&self.inner.callbacks, &bounds, &mut drained);
        steps.run(UpgradeStep::Exit, callbacks).await;
        self.finish_handed_over(run, steps, drained);
    }

    /// The listening sockets and instances to hand to the new process.
    fn handoff(&self) -> Result<Handoff, String> {
        let mut listeners = ListenFds::new();
        for (index, server) in self.servers().iter().enumerate() {
            let fd = match server.listener_fd() {
                Ok(fd) => fd,
                // A custom network stack's listener has no descriptor: the new
                // generation binds the same address through the stack, which shares
                // the listener (see `transport::NetworkStack`).
                Err(error) if error.kind() == std::io::ErrorKind::Unsupported => continue,
                Err(error) => {
                    return Err(format!(
                        "cannot hand over the listener {}: {error}",
                        server.local_addr()
                    ));
                }
            };
            let name = match index {
                0 => GRPC_LISTENER.to_owned(),
                n => format!("{GRPC_LISTENER}-{n}"),
            };
            listeners.listener(name, fd);
        }
        let mut instances = self.registrations();
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        instances.dedup_by(|a, b| a.id == b.id);
        let mut offline: Vec<_> = self
            .registrations_by_registry()
            .into_iter()
            .filter(|registration| !registration.online)
            .map(|registration| registration.instance)
            .collect();
        offline.sort_by(|a, b| a.id.cmp(&b.id));
        offline.dedup_by(|a, b| a.id == b.id);
        Ok(Handoff {
            listeners,
            instances,
            offline,
        })
    }

    /// Ends a failed run: the new process is gone (killed and reaped by the step that
    /// failed), this process goes on serving, and the next trigger may try again. A run
    /// cut short by the shutdown ends the same way but is reported as cancelled: this
    /// process does not go on serving, and nothing is wrong with the new build.
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
            // session or lease, which ends with it: take them back (those that fail are
            // retried in the background until they hold, `registrations.rs`).
            let bound = self.config().step_timeout;
            self.inner.registrations.register_again(bound).await;
        }
        let cancelled = run.cancel.is_cancelled();
        run.report.result = if cancelled {
            UpgradeResult::Cancelled
        } else {
            UpgradeResult::Failed
        };
        self.inner.upgrade.gate.failed();
        if let Some(listener) = &run.setup.listener {
            listener.failed();
        }
        let report = run.finish(&steps);
        let mut counts = self.inner.upgrade.counts.lock();
        if cancelled {
            counts.cancelled += 1;
            drop(counts);
            tracing::info!(app = %self.name(), %report, "upgrade cancelled by the shutdown");
        } else {
            counts.failed += 1;
            drop(counts);
            tracing::warn!(app = %self.name(), %report, "upgrade failed; this process goes on serving");
        }
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
        drained.rejected = self.rejected();
        tracing::info!(app = %self.name(), %report, "upgrade finished; this process exits");
        *self.inner.upgrade.last.lock() = Some(report);
        self.advance(Phase::Stopped);
        self.inner.shutdown.publish(drained);
    }
}

fn ok(outcome: StepOutcome) -> bool {
    outcome == StepOutcome::Completed
}
