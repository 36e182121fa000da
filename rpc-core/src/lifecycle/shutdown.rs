//! Graceful offline: the seven-step shutdown sequence.
//!
//! Read [`Lifecycle::run_shutdown`] top to bottom: it is the list of steps. Each step is
//! a method below that waits only as long as its condition needs; entering its phase,
//! its span, its timing and its line in the report are done for every step alike by
//! [`Steps::run`]. Four bounds apply: `timeout` for the whole sequence, of which
//! `callback_timeout` is kept for step 7 (steps 1 to 6 end by `timeout -
//! callback_timeout`, so the callbacks always get their time), `step_timeout` for each
//! drain and for closing connections, and `consumer_update_wait_time` for step 2; a
//! second signal ends every remaining wait at once.
//!
//! Two kinds of peers are moved away differently. rpc consumers read the closing mark
//! (step 1 on) and re-send a "not executed" refusal elsewhere (step 3 on). Plain gRPC
//! clients read neither: from step 2 on a plain client's call sends its connection the
//! first GOAWAY, so it opens no new stream here, and a connection it dials again is not
//! given HTTP/2's SETTINGS before it sends a request, which gRPC's own clients wait
//! for: they call elsewhere. A request of theirs that still comes once refusals began
//! is refused with REFUSED_STREAM, which gRPC clients retry by themselves
//! (`transport/{peer,socket}.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::join_all;
use tokio::time::Instant;
use tonic_health::ServingStatus;

use super::deadline::Deadline;
use super::sequence::{SequenceStep, Steps};
use super::{Lifecycle, Phase, ShutdownReport, Step, StepOutcome};
use crate::inflight::InflightCounter;

impl Lifecycle {
    /// The sequence. Runs once per lifecycle (see [`Lifecycle::before_shutdown`]).
    pub(crate) async fn run_shutdown(&self) -> ShutdownReport {
        let Some(deadline) = self.begin_shutdown().await else {
            return self.publish(ShutdownReport::default());
        };
        let mut steps = Steps::new(&self.inner.phase, &self.inner.shutdown_steps);
        let mut report = ShutdownReport::default();

        // 1. Withdraw every registration, so no consumer learns of this instance anew.
        //    Subscriptions stay: this process's own references still need updates.
        steps
            .run(Step::Unregister, self.unregister(&deadline, &mut report))
            .await;
        // 2. Give consumers time to drop this instance: until no request came for one
        //    offline window, at most consumer_update_wait_time. Skipped when this
        //    application exports no service: no consumer can be sending to it. A client
        //    that reads no closing mark gets GOAWAY at its next call.
        steps
            .run(Step::WaitForConsumers, self.wait_for_consumers(&deadline))
            .await;
        // 3. From now on a new request is refused with "closing, not executed", which
        //    our consumers re-send elsewhere (other clients: REFUSED_STREAM); plain
        //    clients' connections get GOAWAY.
        steps.run(Step::RejectNew, self.reject_new()).await;
        // 4. Let inbound requests in flight finish.
        steps
            .run(Step::DrainInbound, self.drain(self.inbound(), &deadline))
            .await;
        // 5. Let outbound calls in flight finish; this process's own code may still
        //    start new ones until this step ends.
        steps
            .run(Step::DrainOutbound, self.drain(self.outbound(), &deadline))
            .await;
        // 6. Close listeners and connections (GOAWAY; calls still open at the bound
        //    are cut), channels, subscriptions, registries, and last the admin
        //    endpoint.
        steps
            .run(
                Step::DestroyProtocols,
                self.destroy_protocols(&deadline, &mut report),
            )
            .await;
        // 7. Run the application's callbacks.
        steps
            .run(Step::Callbacks, self.run_callbacks(&deadline, &mut report))
            .await;

        self.finish_shutdown(report, steps)
    }

    /// Waits for a start-up under way to end, then sets the bounds of the sequence;
    /// `None` if there is nothing to shut down.
    async fn begin_shutdown(&self) -> Option<Deadline> {
        if !self.wait_until_started().await {
            return None;
        }
        tracing::info!(app = %self.name(), "graceful shutdown started");
        Some(self.deadline_from_now())
    }

    /// The bounds of a sequence starting now: `timeout`, of which `callback_timeout` is
    /// kept for the callbacks if any is registered (nothing to keep it for otherwise).
    pub(super) fn deadline_from_now(&self) -> Deadline {
        let config = self.config();
        let callbacks = if self.inner.callbacks.is_empty() {
            Duration::ZERO
        } else {
            config.callback_timeout
        };
        Deadline::new(config.timeout, callbacks, self.inner.force.clone())
    }

    /// Completes `report` with the steps taken and the counts kept during the sequence,
    /// enters [`Phase::Stopped`], and publishes the report.
    fn finish_shutdown(
        &self,
        mut report: ShutdownReport,
        steps: Steps<'_, Step>,
    ) -> ShutdownReport {
        report.total = steps.elapsed();
        report.steps = steps.into_reports();
        // Refusals a plain client got as REFUSED_STREAM are reported apart from those
        // rpc consumers got as "not executed" (and re-sent).
        let refused = report.refused_streams as u64;
        report.rejected = self.inner.rejections.count().saturating_sub(refused);
        report.interrupted_by = *self.inner.interrupt.lock();
        self.advance(Phase::Stopped);
        tracing::info!(app = %self.name(), %report, "graceful shutdown finished");
        self.publish(report)
    }

    /// Hands `report` to every [`Lifecycle::wait`]er, and returns it.
    fn publish(&self, report: ShutdownReport) -> ShutdownReport {
        self.inner.finished.send_replace(Some(report.clone()));
        report
    }

    /// Stops at once, the way a killed process does: listeners and connections close,
    /// requests in flight are dropped, and only then are registrations withdrawn (as a
    /// registry session would expire). No step waits. For demonstrations and tests of
    /// what graceful offline prevents; never part of a normal shutdown.
    pub async fn abort(&self) {
        self.advance(Phase::Stopped);
        let registrations = std::mem::take(&mut self.inner.parts.lock().registrations);
        let protocols = self.take_protocols();
        join_all(protocols.servers.iter().map(|server| server.abort())).await;
        for (registry, instance) in &registrations {
            let _ = registry.unregister(instance).await;
        }
        protocols.release().await;
        self.inner
            .finished
            .send_replace(Some(ShutdownReport::default()));
    }

    /// Waits for a start-up under way to end; false if there is nothing to shut down
    /// (never started, or start-up failed or was interrupted and undone).
    async fn wait_until_started(&self) -> bool {
        if self.phase() == Phase::Created {
            self.advance(Phase::Stopped);
            return false;
        }
        let mut phases = self.watch_phase();
        let _ = phases.wait_for(|phase| *phase >= Phase::Serving).await;
        self.phase() != Phase::Stopped
    }

    /// Step 1: health NOT_SERVING, then every registration withdrawn in parallel. A
    /// manual offline or online under way ends first; later ones are refused.
    async fn unregister(&self, deadline: &Deadline, report: &mut ShutdownReport) -> StepOutcome {
        let bound = deadline.bound(self.config().step_timeout);
        let _no_traffic_change = self.settle_traffic(bound).await;
        self.set_health(ServingStatus::NotServing).await;
        let registrations = std::mem::take(&mut self.inner.parts.lock().registrations);
        let withdrawn = AtomicUsize::new(0);
        let withdrawals = registrations.iter().map(|(registry, instance)| {
            let withdrawn = &withdrawn;
            async move {
                match registry.unregister(instance).await {
                    Ok(()) => {
                        withdrawn.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => {
                        tracing::warn!(instance = %instance.id, %error, "unregister failed; the registration will expire");
                    }
                }
            }
        });
        let outcome = deadline.wait(join_all(withdrawals).map(drop), bound).await;
        report.unregister_failures = registrations.len() - withdrawn.load(Ordering::Relaxed);
        if outcome == StepOutcome::TimedOut {
            tracing::warn!(
                pending = report.unregister_failures,
                "unregistering timed out; those registrations will expire with their session"
            );
        }
        outcome
    }

    /// Step 2: until one offline window without a request, at most
    /// `consumer_update_wait_time`; [`StepOutcome::Skipped`] at once when the application
    /// serves no listener (a consumer-only application has no consumers to wait for).
    async fn wait_for_consumers(&self, deadline: &Deadline) -> StepOutcome {
        if self.inner.parts.lock().servers.is_empty() {
            tracing::info!(
                app = %self.name(),
                "no service exported: no consumer to wait for, step skipped"
            );
            return StepOutcome::Skipped;
        }
        let start = Instant::now();
        // A client that reads no closing mark would keep sending until the bound, and
        // be refused in step 3: its next call sends its connection the first GOAWAY,
        // and the connection it dials again is held back until it calls elsewhere.
        for server in self.servers() {
            server.goaway_plain_clients_that_call();
        }
        let window = self.config().offline_request_window_timeout;
        let bound = deadline.bound(self.config().consumer_update_wait_time);
        // Counted from the start of this step: an idle provider still serves for one
        // window after unregistering, for consumers that picked it just before.
        let quiet = async {
            loop {
                let last = self
                    .request_clock()
                    .last()
                    .map_or(start, |last| last.max(start));
                let quiet_until = last + window;
                if Instant::now() >= quiet_until {
                    return;
                }
                tokio::time::sleep_until(quiet_until).await;
            }
        };
        deadline.wait(quiet, bound).await
    }

    /// Step 3: refusals begin (entering [`Phase::Rejecting`], done by [`Steps::run`],
    /// is what the provider filter reads on every request), and every connection of a
    /// plain client gets its first GOAWAY, so that it opens no new stream to be refused.
    async fn reject_new(&self) -> StepOutcome {
        for server in self.servers() {
            server.goaway_plain_clients();
        }
        StepOutcome::Completed
    }

    /// Steps 4 and 5: until `counter` reaches zero, at most `step_timeout`. A request
    /// still in flight at the bound is not lost yet: it may end during step 6.
    async fn drain(&self, counter: &InflightCounter, deadline: &Deadline) -> StepOutcome {
        let bound = deadline.bound(self.config().step_timeout);
        deadline.wait(counter.wait_idle(), bound).await
    }

    /// Step 6: listeners and connections (the GOAWAY exchange, bounded by
    /// `step_timeout`), then references and registries, then what the composition root
    /// handed over (the admin endpoint, which answered probes until now). What had not
    /// finished by then was lost, and is counted: inbound requests left, streams cut,
    /// connections closed by force with calls on them, outbound calls cancelled with
    /// their references.
    async fn destroy_protocols(
        &self,
        deadline: &Deadline,
        report: &mut ShutdownReport,
    ) -> StepOutcome {
        let protocols = self.take_protocols();
        // After an interrupt nobody waits for a GOAWAY exchange: connections close now.
        let bound = if deadline.interrupted() {
            Instant::now()
        } else {
            deadline.bound(self.config().step_timeout)
        };
        let servers = join_all(
            protocols
                .servers
                .iter()
                .map(|server| server.shutdown(bound)),
        );
        // The last responses' guards drop just after their connection closes.
        let inbound_done = deadline.wait(self.inbound().wait_idle(), bound);
        let (closed, _) = tokio::join!(servers, inbound_done);
        for (server, connections) in protocols.servers.iter().zip(closed) {
            report.connections_closed += connections.closed_gracefully;
            report.connections_idle += connections.closed_idle;
            report.connections_forced += connections.forced;
            report.streams_cut += connections.streams_cut;
            report.refused_streams += server.refused_streams();
        }
        report.inbound_left = self.inbound().current();
        report.outbound_left = self.outbound().current();
        let release = protocols.release();
        let outcome = deadline
            .wait(release, deadline.bound(self.config().step_timeout))
            .await;
        let cut_short = report.connections_forced > 0
            || report.streams_cut > 0
            || report.inbound_left > 0
            || report.outbound_left > 0;
        if cut_short && outcome == StepOutcome::Completed {
            StepOutcome::TimedOut
        } else {
            outcome
        }
    }

    /// Step 7: the application's callbacks, within `callback_timeout` (kept for them out
    /// of `timeout`, so they run even after the drains used their bounds), unless a
    /// second signal skipped them.
    async fn run_callbacks(&self, deadline: &Deadline, report: &mut ShutdownReport) -> StepOutcome {
        if deadline.interrupted() {
            let skipped = self.inner.callbacks.discard();
            if skipped > 0 {
                tracing::warn!(skipped, "second signal: shutdown callbacks skipped");
            }
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

/// A span per step, named as the report names it, with the `outcome` field
/// [`Steps::run`] fills.
macro_rules! step_span {
    ($name:literal) => {
        tracing::info_span!($name, outcome = tracing::field::Empty)
    };
}

impl SequenceStep for Step {
    fn phase(self) -> Phase {
        match self {
            Step::Unregister => Phase::Unregistering,
            Step::WaitForConsumers => Phase::WaitingForConsumers,
            Step::RejectNew => Phase::Rejecting,
            Step::DrainInbound => Phase::DrainingInbound,
            Step::DrainOutbound => Phase::DrainingOutbound,
            Step::DestroyProtocols => Phase::Destroying,
            Step::Callbacks => Phase::Callbacks,
        }
    }

    fn span(self) -> tracing::Span {
        match self {
            Step::Unregister => step_span!("unregister"),
            Step::WaitForConsumers => step_span!("wait-for-consumers"),
            Step::RejectNew => step_span!("reject-new"),
            Step::DrainInbound => step_span!("drain-inbound"),
            Step::DrainOutbound => step_span!("drain-outbound"),
            Step::DestroyProtocols => step_span!("destroy-protocols"),
            Step::Callbacks => step_span!("callbacks"),
        }
    }
}
