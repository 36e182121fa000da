//! The old process's last steps once the new one took over: hand over, drain, exit.
//!
//! It differs from the shutdown sequence in what it leaves out. No registration is
//! withdrawn (the new process registered the same instances: they are given up with
//! `Registry::release`, so neither this process's deregistration nor the end of its
//! session or lease removes them). No consumer needs time to forget this instance, and
//! no request is refused: the address stays, the same socket accepts on in the new
//! process, and a GOAWAY sends each client to a new connection there. What this process
//! still carries (requests and streams in flight on its connections, its own outbound
//! calls) finishes within the shutdown's bounds.

use futures_util::future::join_all;
use tokio::time::Instant;

use super::{Lifecycle, Run, StepOutcome};
use crate::lifecycle::ShutdownReport;
use crate::lifecycle::deadline::Deadline;

impl Lifecycle {
    /// Step 5: the gate moves to "handed over" (unless a shutdown came first), the
    /// listener hears of the new main pid, accepting stops, registrations are released.
    pub(super) async fn hand_over(&self, run: &mut Run) -> StepOutcome {
        if let Err(refusal) = self.inner.upgrade.gate.hand_over() {
            return run.fail(StepOutcome::Skipped, refusal.to_string());
        }
        let Some(successor) = run.successor.take() else {
            return StepOutcome::Failed;
        };
        let pid = successor.pid();
        // Before anything stops here: systemd must know the new main pid before this
        // process (its main pid so far) exits.
        if let Some(listener) = &run.setup.listener {
            listener.handed_over(pid);
        }
        *self.inner.upgrade.kept.lock() = Some(successor.taken_over());
        {
            let mut counts = self.inner.upgrade.counts.lock();
            counts.succeeded += 1;
            counts.last_time_to_ready = run.report.time_to_ready;
        }
        // Dials from now on wait in the socket's backlog for the new process, which
        // accepts on the same socket.
        for server in self.servers() {
            server.stop_accepting();
        }
        self.release_registrations().await;
        tracing::info!(app = %self.name(), pid, "handed over to the new process");
        StepOutcome::Completed
    }

    /// Gives up every registration without withdrawing it (bounded by `step_timeout`).
    async fn release_registrations(&self) {
        let registrations = std::mem::take(&mut self.inner.parts.lock().registrations);
        let releases = registrations.iter().map(|(registry, instance)| async move {
            if let Err(error) = registry.release(instance).await {
                tracing::warn!(instance = %instance.id, registry = registry.url(), %error, "releasing a registration failed");
            }
        });
        let bound = self.config().step_timeout;
        if tokio::time::timeout(bound, join_all(releases))
            .await
            .is_err()
        {
            tracing::warn!(?bound, "releasing registrations timed out");
        }
    }

    /// After a failed start: registers every instance again, so that registrations a
    /// killed new process had taken over (same ids: the key moved to its lease, the
    /// znode to its session, the Nacos instance to its connection) are this process's
    /// again before its session ends. Registering an instance again is idempotent.
    pub(super) async fn register_again(&self) {
        let registrations = self.inner.parts.lock().registrations.clone();
        let registers = registrations.iter().map(|(registry, instance)| async move {
            if let Err(error) = registry.register(instance).await {
                tracing::warn!(instance = %instance.id, registry = registry.url(), %error, "registering again after a failed upgrade failed");
            }
        });
        let bound = self.config().step_timeout;
        if tokio::time::timeout(bound, join_all(registers))
            .await
            .is_err()
        {
            tracing::warn!(?bound, "registering again after a failed upgrade timed out");
        }
    }

    /// Step 6: GOAWAY and the connections' drain (bounded by `step_timeout`, streams
    /// cut at the bound as in the shutdown), then this process's own outbound calls,
    /// then references and registry clients closed.
    pub(super) async fn drain_handed_over(
        &self,
        deadline: &Deadline,
        report: &mut ShutdownReport,
    ) -> StepOutcome {
        let protocols = self.take_protocols();
        let bound = if deadline.interrupted() {
            Instant::now()
        } else {
            deadline.bound(self.config().step_timeout)
        };
        let closed = join_all(protocols.servers.iter().map(|s| s.shutdown(bound))).await;
        for connections in closed {
            report.connections_closed += connections.closed_gracefully;
            report.connections_idle += connections.closed_idle;
            report.connections_forced += connections.forced;
            report.streams_cut += connections.streams_cut;
        }
        report.inbound_left = self.inbound().current();
        let outbound = deadline
            .wait(
                self.outbound().wait_idle(),
                deadline.bound(self.config().step_timeout),
            )
            .await;
        report.outbound_left = self.outbound().current();
        let released = deadline
            .wait(
                protocols.release(),
                deadline.bound(self.config().step_timeout),
            )
            .await;
        if report.forced() {
            StepOutcome::TimedOut
        } else if outbound != StepOutcome::Completed {
            outbound
        } else {
            released
        }
    }

    /// Step 7: the application's callbacks, unless a signal interrupted the drain.
    pub(super) async fn exit_callbacks(
        &self,
        deadline: &Deadline,
        report: &mut ShutdownReport,
    ) -> StepOutcome {
        if deadline.interrupted() {
            self.inner.callbacks.discard();
            return StepOutcome::Skipped;
        }
        let end = deadline.callbacks_end();
        report.callbacks_failed = self.inner.callbacks.run_all(end).await;
        if report.callbacks_failed > 0 {
            StepOutcome::TimedOut
        } else {
            StepOutcome::Completed
        }
    }
}
