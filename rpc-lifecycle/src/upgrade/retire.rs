//! The old process's last steps once the new one took over: hand over, drain, exit.
//!
//! It differs from the shutdown sequence in what it leaves out. No registration is
//! withdrawn (the new process registered the same instances: they are given up with
//! `Registry::release`, so neither this process's deregistration nor the end of its
//! session or lease removes them). No consumer needs time to forget this instance, and
//! no request is refused: the address stays, the same socket accepts on in the new
//! process, and a GOAWAY sends each client to a new connection there. What this process
//! still carries (requests and streams in flight on its connections, its own outbound
//! calls) finishes within the shutdown's bounds, closed as shutdown step 6 closes it
//! (`protocols::close_connections`); the exit step is shutdown step 7's callbacks.

use super::Run;
use crate::bounds::SequenceBounds;
use crate::protocols::close_connections;
use crate::step::StepOutcome;
use crate::{Lifecycle, ShutdownReport};

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
        self.inner
            .registrations
            .release_all(self.config().step_timeout)
            .await;
        tracing::info!(app = %self.name(), pid, "handed over to the new process");
        StepOutcome::Completed
    }

    /// Step 6: GOAWAY and the connections' drain (bounded by `step_timeout`, streams
    /// cut at the bound as in the shutdown), then this process's own outbound calls,
    /// then references and registry clients closed.
    pub(super) async fn drain_handed_over(
        &self,
        bounds: &SequenceBounds,
        report: &mut ShutdownReport,
    ) -> StepOutcome {
        let counters = &self.inner.counters;
        let opened = self.inner.protocols.take();
        // Streams are told as their connections get GOAWAY: a stream their handler ends
        // as moved is re-opened by its consumer on a new connection — to the new process.
        self.inner.streams.tell_all();
        let tally = close_connections(&opened.servers, &counters.inbound, bounds).await;
        report.count_connections(tally);
        report.streams_moved = self.inner.streams.moved();
        report.inbound_left = counters.inbound.current();
        let outbound = bounds
            .wait(counters.outbound.wait_idle(), bounds.step_end())
            .await;
        report.outbound_left = counters.outbound.current();
        let released = bounds.wait(opened.release(), bounds.step_end()).await;
        if report.forced() {
            StepOutcome::TimedOut
        } else if outbound != StepOutcome::Completed {
            outbound
        } else {
            released
        }
    }
}
