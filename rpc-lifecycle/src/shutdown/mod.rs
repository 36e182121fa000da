//! Graceful offline: the seven-step shutdown sequence.
//!
//! Read [`Lifecycle::run_shutdown`] top to bottom: it is the list of steps. Each step is
//! a function in `steps.rs` over the parts it needs, that waits only as long as its
//! condition needs; entering its phase, its span, its timing and its line in the report
//! are done for every step alike by the sequence runner (`sequence.rs`). Four bounds
//! apply (`bounds.rs`): `timeout` for the whole sequence, of which the callbacks' time
//! (`callback_timeout`; unset, 5 s or half of `timeout`, whichever is less) is kept for
//! step 7 when a callback is registered (steps 1 to 6 end by `timeout` minus that, so the
//! callbacks always get their time), `step_timeout` for each drain and for closing connections,
//! and `consumer_update_wait_time` for step 2; a second signal ends every remaining wait
//! at once.
//!
//! Two kinds of peers are moved away differently. rpc consumers read the closing mark
//! (step 1 on) and re-send a "not executed" refusal elsewhere (step 3 on). Plain gRPC
//! clients read neither: from one offline window into step 2 on (within it a client that
//! follows the registry, a Dubbo consumer, is still moving away by itself) a plain
//! client's call sends its connection the first GOAWAY, so it opens no new stream here, and a connection it dials again is not
//! given HTTP/2's SETTINGS before it sends a request, which gRPC's own clients wait
//! for: they call elsewhere. A request of theirs that still comes once refusals began
//! is refused with REFUSED_STREAM, which gRPC clients retry by themselves
//! (lossless-rpc-transport's `peer.rs` and `socket.rs`).

mod control;
mod shutdown_report;
pub(crate) mod steps;

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::join_all;
use tracing::Instrument;

pub(crate) use control::ShutdownControl;
pub use shutdown_report::{Interrupt, ShutdownReport};

use crate::bounds::SequenceBounds;
use crate::sequence::Steps;
use crate::step::Step;
use crate::upgrade::AtShutdown;
use crate::{Lifecycle, Phase};

impl Lifecycle {
    /// Starts the shutdown sequence if it has not started, and waits for its report.
    ///
    /// This is the BeforeShutdown hook: with `internal_signal: false` the application
    /// calls it when it chooses (e.g. after closing its own web server). Calling it again,
    /// or concurrently, awaits the same single run. The sequence runs in its own task, so
    /// dropping the returned future does not stop it.
    ///
    /// # Panics
    /// When first called outside a tokio runtime (the sequence is spawned on it).
    pub fn before_shutdown(&self) -> impl Future<Output = ShutdownReport> + Send + 'static {
        // After a hot upgrade's hand-over this process is draining already, and will
        // exit: the instance belongs to the new process, whose own sequence a shutdown
        // is for. An upgrade before its hand-over is stopped (its new process killed).
        if self.inner.upgrade.gate.shutdown() == AtShutdown::HandedOver {
            tracing::info!(app = %self.name(), "shutdown asked for after the hand-over: draining already");
            let this = self.clone();
            return async move { this.wait().await }.boxed();
        }
        // Asked to stop while still starting: start-up is cut short and undone, and the
        // sequence (below) then finds nothing left to stop.
        if self.phase() < Phase::Serving {
            self.inner.shutdown.cancel_start();
        }
        self.inner.shutdown.run_once(|| {
            let this = self.clone();
            // Every step's span (see `sequence.rs`) is a child of this one.
            let span = tracing::info_span!("shutdown", app = %self.name());
            let task = tokio::spawn(async move { this.run_shutdown().await }.instrument(span));
            async move {
                task.await.unwrap_or_else(|error| {
                    tracing::error!(%error, "shutdown sequence task failed");
                    ShutdownReport::default()
                })
            }
            .boxed()
        })
    }

    /// Waits until a shutdown (started by a signal or by [`Lifecycle::before_shutdown`])
    /// has finished, and returns its report. Does not start one.
    pub async fn wait(&self) -> ShutdownReport {
        self.inner.shutdown.wait().await
    }

    /// Skips the rest of a shutdown under way (a second signal): every remaining wait
    /// ends at once, connections are closed by force, callbacks are skipped, and the
    /// report's exit code becomes 130 (SIGINT) or 143 (SIGTERM).
    pub fn interrupt(&self, by: Interrupt) {
        self.inner.shutdown.interrupt(by);
    }

    /// The steps of the shutdown taken so far, in order, each with its duration and
    /// outcome: empty before shutdown, growing while it runs, all seven once it ended.
    pub fn shutdown_steps(&self) -> Vec<crate::StepReport> {
        self.inner.shutdown.steps().lock().clone()
    }

    /// The report of the finished shutdown, if one has finished.
    pub fn shutdown_report(&self) -> Option<ShutdownReport> {
        self.inner.shutdown.report()
    }

    /// The sequence. Runs once per lifecycle (see [`Lifecycle::before_shutdown`]).
    async fn run_shutdown(&self) -> ShutdownReport {
        let Some(bounds) = self.begin_shutdown().await else {
            return self.inner.shutdown.publish(ShutdownReport::default());
        };
        let parts = &*self.inner;
        let mut sequence = Steps::new(
            &parts.phase,
            parts.streams.step_span(),
            parts.shutdown.steps(),
        );
        let mut report = ShutdownReport::default();

        // 1. Withdraw every registration, so no consumer learns of this instance anew.
        //    Subscriptions stay: this process's own references still need updates.
        //    Stream handlers are told now, so that a long stream moves to another
        //    instance within the drain instead of being cut at its bound.
        //    The connections' tally starts here: consumers that learn of the withdrawal
        //    close theirs before step 6's GOAWAY, and those closes belong to this report.
        parts.streams.tell_all();
        for server in parts.protocols.servers() {
            server.begin_close();
        }
        let unregister =
            steps::unregister(&parts.registrations, &parts.health, &bounds, &mut report);
        sequence.run(Step::Unregister, unregister).await;
        // 2. Give consumers time to drop this instance: until no request came for one
        //    offline window, at most consumer_update_wait_time. Skipped when this
        //    application exports no service: no consumer can be sending to it. A client
        //    that reads no closing mark gets GOAWAY at its next call.
        let requests = &parts.counters.requests;
        let wait = steps::wait_for_consumers(&parts.protocols, requests, &parts.config, &bounds);
        sequence.run(Step::WaitForConsumers, wait).await;
        // 3. From now on a new request is refused with "closing, not executed", which
        //    our consumers re-send elsewhere (other clients: REFUSED_STREAM); plain
        //    clients' connections get GOAWAY.
        let reject = steps::reject_new(&parts.protocols);
        sequence.run(Step::RejectNew, reject).await;
        // 4. Let inbound requests in flight finish.
        let inbound = steps::drain(&parts.counters.inbound, &bounds);
        sequence.run(Step::DrainInbound, inbound).await;
        // 5. Let outbound calls in flight finish; this process's own code may still
        //    start new ones until this step ends.
        let outbound = steps::drain(&parts.counters.outbound, &bounds);
        sequence.run(Step::DrainOutbound, outbound).await;
        // 6. Close listeners and connections (GOAWAY; calls still open at the bound
        //    are cut), channels, subscriptions, registries, and last the admin
        //    endpoint.
        let destroy =
            steps::destroy_protocols(&parts.protocols, &parts.counters, &bounds, &mut report);
        sequence.run(Step::DestroyProtocols, destroy).await;
        // 7. Run the application's callbacks.
        let callbacks = steps::run_callbacks(&parts.callbacks, &bounds, &mut report);
        sequence.run(Step::Callbacks, callbacks).await;

        self.finish_shutdown(report, sequence)
    }

    /// Waits for a start-up under way to end, then sets the bounds of the sequence;
    /// `None` if there is nothing to shut down.
    async fn begin_shutdown(&self) -> Option<SequenceBounds> {
        if !self.wait_until_started().await {
            return None;
        }
        tracing::info!(app = %self.name(), "graceful shutdown started");
        Some(self.bounds_from_now())
    }

    /// The bounds of a sequence starting now: `timeout`, of which the callbacks' time
    /// (`callback_timeout`, or when unset 5 s or half of `timeout`, whichever is less:
    /// [`ShutdownConfig::callback_time`](crate::ShutdownConfig::callback_time)) is kept
    /// for them if any is registered (nothing to keep it for otherwise).
    pub(crate) fn bounds_from_now(&self) -> SequenceBounds {
        let config = self.config();
        let callbacks = if self.inner.callbacks.is_empty() {
            Duration::ZERO
        } else {
            config.callback_time()
        };
        SequenceBounds::new(
            config.timeout,
            callbacks,
            config.step_timeout,
            self.inner.shutdown.force(),
        )
    }

    /// Completes `report` with the steps taken and the counts kept during the sequence,
    /// enters [`Phase::Stopped`], and publishes the report.
    fn finish_shutdown(
        &self,
        mut report: ShutdownReport,
        sequence: Steps<'_, Step>,
    ) -> ShutdownReport {
        report.total = sequence.elapsed();
        report.steps = sequence.into_reports();
        // Refusals a plain client got as REFUSED_STREAM are reported apart from those
        // rpc consumers got as "not executed" (and re-sent).
        let refused = report.refused_streams as u64;
        report.rejected = self.rejected().saturating_sub(refused);
        report.interrupted_by = self.inner.shutdown.interrupted_by();
        report.streams_moved = self.inner.streams.moved();
        self.advance(Phase::Stopped);
        tracing::info!(app = %self.name(), %report, "graceful shutdown finished");
        self.inner.shutdown.publish(report)
    }

    /// Stops at once, the way a killed process does: listeners and connections close,
    /// requests in flight are dropped, and only then are registrations withdrawn (as a
    /// registry session would expire). No step waits. For demonstrations and tests of
    /// what graceful offline prevents; never part of a normal shutdown.
    pub async fn abort(&self) {
        self.advance(Phase::Stopped);
        let registrations = self.inner.registrations.take_all();
        let opened = self.inner.protocols.take();
        join_all(opened.servers.iter().map(|server| server.abort())).await;
        for (registry, instance) in &registrations {
            let _ = registry.unregister(instance).await;
        }
        opened.release().await;
        self.inner.shutdown.publish(ShutdownReport::default());
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
}
