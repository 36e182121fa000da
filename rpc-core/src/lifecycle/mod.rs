//! The lifecycle manager: graceful online (start order) and graceful offline (the
//! seven-step shutdown sequence), the hot upgrade (`upgrade/`), phases, signals and the
//! BeforeShutdown hook.
//!
//! Deploys cause two kinds of failed requests: a request sent to an instance that cannot
//! serve it, and a request whose process is killed while serving it. Start-up prevents
//! the first by announcing an instance only after everything it needs is up
//! ([`StartPlan`]); shutdown prevents both by withdrawing the announcement first, telling
//! consumers directly, refusing late requests in a way consumers can safely retry, and
//! draining what is in flight before anything is closed ([`Lifecycle::before_shutdown`]).
//!
//! This is written here rather than taken from a crate because it *is* the product: the
//! order of the steps, what each waits for, and that no wait lasts longer than its
//! condition needs.

mod callbacks;
mod config;
mod deadline;
mod handles;
mod observe;
mod phase;
mod probes;
mod protocols;
mod report;
mod sequence;
mod shutdown;
mod signals;
#[cfg(test)]
mod span_tests;
mod startup;
#[cfg(test)]
mod test_registry;
#[cfg(test)]
mod tests;
mod traffic;
#[cfg(test)]
mod traffic_tests;
mod upgrade;

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic_health::server::{HealthReporter, HealthService};
use tracing::Instrument;

pub use config::ShutdownConfig;
pub use handles::{ConsumerHandles, ProviderHandles};
pub use phase::{Phase, PhaseReader};
pub use probes::{Probe, ProbeAnswer};
pub use report::{Interrupt, ShutdownReport, Step, StepOutcome, StepReport};
pub use startup::{
    BoxHttpService, Export, ExportedService, ManagedReference, ReadinessGate, StartError, StartPlan,
};
pub use traffic::{Registration, TrafficChange, TrafficError};
pub use upgrade::{
    Handoff, Refusal, Spawner, Successor, UpgradeConfig, UpgradeCounts, UpgradeListener,
    UpgradeReport, UpgradeResult, UpgradeStep,
};

use crate::activity::RequestClock;
use crate::inflight::InflightCounter;
use crate::offline_services::OfflineServices;
use crate::registry::Registry;
use crate::rejections::RejectionCounter;
use crate::transport::ServerHandle;
use crate::{Instance, ServiceKey};
use callbacks::Callbacks;
use phase::PhaseCell;
use protocols::Closer;
use upgrade::{AtShutdown, UpgradeState};

/// One application's lifecycle: its phase, its in-flight counters, what it started, and
/// the shutdown sequence that stops it.
///
/// Cheap to clone (one `Arc`); clones share everything. Filters on the request path do
/// not hold it: they get only the handles they need ([`Lifecycle::provider_handles`],
/// [`Lifecycle::consumer_handles`]).
#[derive(Clone)]
pub struct Lifecycle {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    config: ShutdownConfig,
    phase: PhaseCell,
    inbound: InflightCounter,
    outbound: InflightCounter,
    requests: RequestClock,
    rejections: RejectionCounter,
    health: HealthReporter,
    parts: Mutex<Parts>,
    callbacks: Callbacks,
    sequence: Mutex<Option<Shared<BoxFuture<'static, ShutdownReport>>>>,
    finished: watch::Sender<Option<ShutdownReport>>,
    force: CancellationToken,
    /// Cancelled when shutdown is asked for while start-up is still under way.
    start_cancel: CancellationToken,
    interrupt: Mutex<Option<Interrupt>>,
    /// The provided services manually offline, shared with the provider filter.
    offline: OfflineServices,
    /// Held by a manual offline or online for its whole run, and by shutdown step 1
    /// before it withdraws the registrations: one change at a time, none behind the
    /// shutdown's back (see `traffic.rs`).
    traffic: tokio::sync::Mutex<()>,
    /// The shutdown's steps taken so far, for observers while it runs.
    shutdown_steps: Mutex<Vec<StepReport>>,
    /// Every server ever started, including those shutdown has closed, so that counts
    /// observers read (GOAWAYs sent) never go back.
    served: Mutex<Vec<ServerHandle>>,
    /// The hot upgrade: one at a time, its steps, its counts.
    upgrade: UpgradeState,
}

/// What start-up created and shutdown must undo.
#[derive(Default)]
struct Parts {
    registrations: Vec<(Arc<dyn Registry>, Instance)>,
    /// Registrations withdrawn by a manual offline, kept to be registered again.
    withdrawn: Vec<(Arc<dyn Registry>, Instance)>,
    /// The services the application provides.
    provided: Vec<ServiceKey>,
    servers: Vec<ServerHandle>,
    references: Vec<Arc<dyn ManagedReference>>,
    registries: Vec<Arc<dyn Registry>>,
    health_names: Vec<String>,
    /// What the composition root started beside the lifecycle (the admin endpoint),
    /// closed last in step 6 (see [`Lifecycle::close_in_step_6`]).
    closers: Vec<Closer>,
}

impl Lifecycle {
    /// A lifecycle in phase [`Phase::Created`] for the application `name` (used in logs).
    pub fn new(name: impl Into<String>, config: ShutdownConfig) -> Self {
        let name = name.into();
        Self {
            inner: Arc::new(Inner {
                phase: PhaseCell::new(name.clone()),
                name,
                config,
                inbound: InflightCounter::new(),
                outbound: InflightCounter::new(),
                requests: RequestClock::new(),
                rejections: RejectionCounter::new(),
                health: HealthReporter::new(),
                parts: Mutex::new(Parts::default()),
                callbacks: Callbacks::default(),
                sequence: Mutex::new(None),
                finished: watch::Sender::new(None),
                force: CancellationToken::new(),
                start_cancel: CancellationToken::new(),
                interrupt: Mutex::new(None),
                offline: OfflineServices::new(),
                traffic: tokio::sync::Mutex::new(()),
                shutdown_steps: Mutex::new(Vec::new()),
                served: Mutex::new(Vec::new()),
                upgrade: UpgradeState::new(),
            }),
        }
    }

    /// The application's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The shutdown bounds and switches.
    pub fn config(&self) -> &ShutdownConfig {
        &self.inner.config
    }

    /// The current phase (one atomic load).
    pub fn phase(&self) -> Phase {
        self.inner.phase.get()
    }

    /// A receiver that sees every phase change.
    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.inner.phase.subscribe()
    }

    /// Every phase entered so far, with the time it was entered (tokio's clock).
    pub fn phase_history(&self) -> Vec<(Phase, tokio::time::Instant)> {
        self.inner.phase.history()
    }

    /// Inbound requests in flight on this application's providers (drained in step 4).
    pub fn inbound(&self) -> &InflightCounter {
        &self.inner.inbound
    }

    /// Outbound calls in flight on this application's references (drained in step 5).
    pub fn outbound(&self) -> &InflightCounter {
        &self.inner.outbound
    }

    /// Arrival time of the latest inbound request (ends step 2 early).
    pub fn request_clock(&self) -> &RequestClock {
        &self.inner.requests
    }

    /// The gRPC health service (`grpc.health.v1.Health`) whose statuses this lifecycle
    /// drives: SERVING once registered, NOT_SERVING from shutdown step 1 on. Add it to
    /// the exported routes.
    pub fn health_service(&self) -> tonic_health::pb::health_server::HealthServer<HealthService> {
        tonic_health::pb::health_server::HealthServer::new(HealthService::from_health_reporter(
            self.inner.health.clone(),
        ))
    }

    /// Registers a callback for shutdown step 7. Callbacks run exactly once, in
    /// registration order, within `callback_timeout` (kept out of `timeout` for them, so
    /// they run even when the drains used every bound), each allowed an equal share of
    /// what is left when it starts; a panic is caught and logged.
    pub fn on_shutdown<F, Fut>(&self, callback: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.inner
            .callbacks
            .push(Box::new(move || callback().boxed()));
    }

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
            self.inner.start_cancel.cancel();
        }
        let mut sequence = self.inner.sequence.lock();
        let shared = sequence.get_or_insert_with(|| {
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
            .shared()
        });
        shared.clone().boxed()
    }

    /// Waits until a shutdown (started by a signal or by [`Lifecycle::before_shutdown`])
    /// has finished, and returns its report. Does not start one.
    pub async fn wait(&self) -> ShutdownReport {
        let mut rx = self.inner.finished.subscribe();
        let report = rx.wait_for(Option::is_some).await;
        match report {
            Ok(report) => report.clone().unwrap_or_default(),
            Err(_) => ShutdownReport::default(),
        }
    }

    /// Skips the rest of a shutdown under way (a second signal): every remaining wait
    /// ends at once, connections are closed by force, callbacks are skipped, and the
    /// report's exit code becomes 130 (SIGINT) or 143 (SIGTERM).
    pub fn interrupt(&self, by: Interrupt) {
        self.inner.interrupt.lock().get_or_insert(by);
        self.inner.force.cancel();
    }

    /// Installs SIGTERM/SIGINT handlers that start the sequence (a second signal
    /// interrupts it), a SIGUSR2 handler that starts a hot upgrade
    /// ([`Lifecycle::upgrade`]), and a SIGHUP handler that only logs, so SIGHUP does not
    /// end the process. Done by start-up when `internal_signal` is true.
    ///
    /// # Errors
    /// The operating system's error if a handler cannot be installed.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        signals::install(self.clone())
    }

    /// The servers this lifecycle started, for their addresses.
    pub fn servers(&self) -> Vec<ServerHandle> {
        self.inner.parts.lock().servers.clone()
    }

    /// The instances currently registered.
    pub fn registrations(&self) -> Vec<Instance> {
        let parts = self.inner.parts.lock();
        parts.registrations.iter().map(|(_, i)| i.clone()).collect()
    }

    pub(crate) fn advance(&self, phase: Phase) {
        self.inner.phase.advance(phase);
    }
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("name", &self.inner.name)
            .field("phase", &self.phase())
            .finish()
    }
}
