//! Graceful offline: the seven-step shutdown sequence.
//!
//! Read [`Lifecycle::run_shutdown`] top to bottom: it is the list of steps. Each step is
//! a method below that waits only as long as its condition needs; entering its phase,
//! its span, its timing and its line in the report are done for every step alike by
//! [`Steps::run`]. Three bounds apply: `timeout` for the whole sequence, `step_timeout`
//! for each drain and for closing connections, and `consumer_update_wait_time` for
//! step 2; a second signal ends every remaining wait at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join_all};
use tokio::time::Instant;
use tonic_health::ServingStatus;

use super::deadline::Deadline;
use super::sequence::{SequenceStep, Steps};
use super::startup::ManagedReference;
use super::{Lifecycle, Phase, ShutdownReport, Step, StepOutcome};
use crate::inflight::InflightCounter;
use crate::registry::Registry;
use crate::transport::ServerHandle;

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
        //    application exports no service: no consumer can be sending to it.
        steps
            .run(Step::WaitForConsumers, self.wait_for_consumers(&deadline))
            .await;
        // 3. From now on a new request is refused with "closing, not executed", which
        //    our consumers re-send elsewhere.
        steps.run(Step::RejectNew, reject_new()).await;
        // 4. Let inbound requests in flight finish.
        steps
            .run(
                Step::DrainInbound,
                self.drain(self.inbound(), &deadline, &mut report.inbound_left),
            )
            .await;
        // 5. Let outbound calls in flight finish; this process's own code may still
        //    start new ones until this step ends.
        steps
            .run(
                Step::DrainOutbound,
                self.drain(self.outbound(), &deadline, &mut report.outbound_left),
            )
            .await;
        // 6. Close listeners and connections (GOAWAY), channels, subscriptions,
        //    registries, and last the admin endpoint.
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
        Some(Deadline::new(
            self.config().timeout,
            self.inner.force.clone(),
        ))
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
        report.rejected = self.inner.rejections.count();
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

    /// Takes out what step 6 (or an abort, or the hot upgrade's drain) closes.
    pub(super) fn take_protocols(&self) -> Protocols {
        let mut parts = self.inner.parts.lock();
        Protocols {
            servers: std::mem::take(&mut parts.servers),
            references: std::mem::take(&mut parts.references),
            registries: std::mem::take(&mut parts.registries),
            closers: std::mem::take(&mut parts.closers),
        }
    }

    /// Hands step 6 something the composition root started beside this lifecycle's own
    /// listeners — the admin endpoint — to close last, after listeners, references and
    /// registries, so that it answers (probes, status) during the whole sequence. An
    /// [`abort`](Lifecycle::abort), including the one that undoes a failed start-up,
    /// closes it too. `close` runs at most once.
    pub fn close_in_step_6<F, Fut>(&self, close: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner
            .parts
            .lock()
            .closers
            .push(Box::new(move || close().boxed()));
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

    /// Steps 4 and 5: until `counter` reaches zero, at most `step_timeout`; `left` is
    /// set to what was still in flight when the step ended.
    async fn drain(
        &self,
        counter: &InflightCounter,
        deadline: &Deadline,
        left: &mut usize,
    ) -> StepOutcome {
        let bound = deadline.bound(self.config().step_timeout);
        let outcome = deadline.wait(counter.wait_idle(), bound).await;
        *left = counter.current();
        outcome
    }

    /// Step 6: listeners and connections (GOAWAY, bounded by `step_timeout`), then
    /// references and registries, then what the composition root handed over (the
    /// admin endpoint, which answered probes until now).
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
        let closed = join_all(
            protocols
                .servers
                .iter()
                .map(|server| server.shutdown(bound)),
        )
        .await;
        for connections in closed {
            report.connections_closed += connections.closed_gracefully;
            report.connections_forced += connections.forced;
            report.streams_cut += connections.streams_cut;
        }
        let release = protocols.release();
        let outcome = deadline
            .wait(release, deadline.bound(self.config().step_timeout))
            .await;
        let cut_short = report.connections_forced > 0 || report.streams_cut > 0;
        if cut_short && outcome == StepOutcome::Completed {
            StepOutcome::TimedOut
        } else {
            outcome
        }
    }

    /// Step 7: the application's callbacks, unless a second signal skipped them.
    async fn run_callbacks(&self, deadline: &Deadline, report: &mut ShutdownReport) -> StepOutcome {
        if deadline.interrupted() {
            let skipped = self.inner.callbacks.discard();
            if skipped > 0 {
                tracing::warn!(skipped, "second signal: shutdown callbacks skipped");
            }
            return StepOutcome::Skipped;
        }
        report.callbacks_failed = self.inner.callbacks.run_all(deadline.end()).await;
        if report.callbacks_failed > 0 {
            StepOutcome::TimedOut
        } else {
            StepOutcome::Completed
        }
    }
}

/// Something [`Lifecycle::close_in_step_6`] was handed.
pub(super) type Closer = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// What step 6 closes (and a hot upgrade's old process after its hand-over): listeners
/// and connections, references, registries, and last what the composition root handed
/// over (the admin endpoint).
pub(super) struct Protocols {
    pub(super) servers: Vec<ServerHandle>,
    references: Vec<Arc<dyn ManagedReference>>,
    registries: Vec<Arc<dyn Registry>>,
    closers: Vec<Closer>,
}

impl Protocols {
    /// Closes the references' channels and subscriptions, then the registries, then
    /// what the composition root handed over.
    pub(super) async fn release(self) {
        join_all(self.references.iter().map(|reference| reference.close())).await;
        join_all(
            self.registries
                .iter()
                .map(|registry| close_registry(registry.clone())),
        )
        .await;
        join_all(self.closers.into_iter().map(|close| close())).await;
    }
}

async fn close_registry(registry: Arc<dyn Registry>) {
    if let Err(error) = registry.close().await {
        tracing::warn!(registry = registry.url(), %error, "closing registry failed");
    }
}

/// Step 3. Entering [`Phase::Rejecting`] (done by [`Steps::run`]) is the whole step:
/// the provider filter reads the phase on every request and refuses from then on.
async fn reject_new() -> StepOutcome {
    StepOutcome::Completed
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
