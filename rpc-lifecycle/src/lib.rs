//! # lossless-rpc-lifecycle
//!
//! The lifecycle manager: graceful online (start order) and graceful offline (the
//! seven-step shutdown sequence), the hot upgrade (`upgrade/`, with its process
//! mechanics in [`process`]), phases, signals and the BeforeShutdown hook.
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
//!
//! # How it is built
//!
//! [`Lifecycle`] is a thin facade. The state lives in parts that each own theirs and
//! nothing else:
//!
//! | part | holds | file |
//! |---|---|---|
//! | [`PhaseCell`] | the phase, its history, the `watch` channel | lossless-rpc-core |
//! | `RequestCounters` | in-flight counters, the request clock, refusals | `counters.rs` |
//! | `HealthStatus` | the gRPC health service's statuses | `health_service.rs` |
//! | `Registrations` | registered and withdrawn instances, the manual offline set, one traffic change at a time | `registrations.rs` |
//! | `Protocols` | servers, references, registries, what step 6 closes last | `protocols.rs` |
//! | `Callbacks` | the application's shutdown callbacks | `callbacks.rs` |
//! | `ShutdownControl` | the one run of the sequence, its report, the interrupt | `shutdown/control.rs` |
//! | `UpgradeState` | one upgrade at a time, its steps and counts | `upgrade/` |
//!
//! A shutdown step is a function over the parts it needs (`shutdown/steps.rs`). An
//! upgrade step is a method of [`Lifecycle`] over one `Run` (`upgrade/early_steps.rs`,
//! `upgrade/retire.rs`): together they reach nine of the facade's fields (the
//! upgrade's state, the phase, the registrations and their one-change lock, the
//! protocols, the counters, the streams, the callbacks, the shutdown control), so a list
//! of parts per step would only restate the facade.
//! [`Lifecycle::before_shutdown`]'s `run_shutdown` and the upgrade's `run_upgrade` are
//! the lists of their steps.

// No module of this crate needs `unsafe`: inherited descriptors are adopted by
// rpc-transport's `fd` module, the one place of the workspace that may.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod backoff;
mod bounds;
mod callbacks;
mod config;
mod counters;
mod handles;
mod health_service;
mod probes;
pub mod process;
mod protocols;
mod registrations;
mod registry_calls;
mod sequence;
mod shutdown;
mod signals;
#[cfg(test)]
mod span_tests;
mod start_plan;
mod startup;
mod step;
mod tallies;
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
use tokio::sync::watch;
use tonic_health::server::HealthService;

pub use config::{DEFAULT_CALLBACK_TIMEOUT, ShutdownConfig};
pub use probes::{Probe, ProbeAnswer};
pub use registrations::{Pending, Registration};
pub use rpc_core::{
    ConsumerHandles, ManagedReference, Phase, PhaseCell, PhaseReader, ProviderHandles,
};
pub use shutdown::{Interrupt, ShutdownReport};
pub use start_plan::{
    BoxHttpService, Export, ExportedService, ReadinessGate, StartError, StartPlan,
};
pub use step::{Step, StepOutcome, StepReport, UpgradeStep};
pub use traffic::{ONLINE_REVISION, TrafficChange, TrafficError};
pub use upgrade::{
    Handoff, Refusal, Spawner, Successor, UpgradeConfig, UpgradeCounts, UpgradeListener,
    UpgradeReport, UpgradeResult,
};

use callbacks::Callbacks;
use counters::RequestCounters;
use health_service::HealthStatus;
use protocols::Protocols;
use registrations::Registrations;
use rpc_core::{InflightCounter, Instance, RequestClock, StreamDrain};
use rpc_transport::ServerHandle;
use shutdown::ShutdownControl;
use upgrade::UpgradeState;

/// One application's lifecycle: its phase, its in-flight counters, what it started, and
/// the shutdown sequence that stops it.
///
/// Cheap to clone (one `Arc`); clones share everything. Filters on the request path do
/// not hold it: they get only the handles they need ([`Lifecycle::provider_handles`],
/// [`Lifecycle::consumer_handles`]).
#[derive(Clone)]
pub struct Lifecycle {
    inner: Arc<LifecycleParts>,
}

/// The parts a lifecycle is made of (see the crate documentation): each owns its state
/// and its lock, if it has one.
struct LifecycleParts {
    name: String,
    config: ShutdownConfig,
    phase: PhaseCell,
    counters: RequestCounters,
    health: HealthStatus,
    registrations: Registrations,
    /// Tells stream handlers that this instance goes offline; counts streams moved.
    streams: StreamDrain,
    protocols: Protocols,
    callbacks: Callbacks,
    shutdown: ShutdownControl,
    upgrade: UpgradeState,
}

impl Lifecycle {
    /// A lifecycle in phase [`Phase::Created`] for the application `name` (used in logs).
    pub fn new(name: impl Into<String>, config: ShutdownConfig) -> Self {
        let name = name.into();
        let registrations = Registrations::default();
        let streams = StreamDrain::new(registrations.offline().clone());
        Self {
            inner: Arc::new(LifecycleParts {
                phase: PhaseCell::new(name.clone()),
                name,
                config,
                counters: RequestCounters::default(),
                health: HealthStatus::default(),
                registrations,
                streams,
                protocols: Protocols::default(),
                callbacks: Callbacks::default(),
                shutdown: ShutdownControl::default(),
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
        &self.inner.counters.inbound
    }

    /// Whether this application's stream handlers are told to end their streams as
    /// moved, and how many did (see
    /// [`lossless_rpc_core::DrainNotice`](rpc_core::DrainNotice)).
    pub fn streams(&self) -> &StreamDrain {
        &self.inner.streams
    }

    /// Outbound calls in flight on this application's references (drained in step 5).
    pub fn outbound(&self) -> &InflightCounter {
        &self.inner.counters.outbound
    }

    /// Arrival time of the latest inbound request (ends step 2 early).
    pub fn request_clock(&self) -> &RequestClock {
        &self.inner.counters.requests
    }

    /// The gRPC health service (`grpc.health.v1.Health`) whose statuses this lifecycle
    /// drives: SERVING once registered, NOT_SERVING from shutdown step 1 on. Add it to
    /// the exported routes.
    pub fn health_service(&self) -> tonic_health::pb::health_server::HealthServer<HealthService> {
        self.inner.health.service()
    }

    /// Registers a callback for shutdown step 7. Callbacks run exactly once, in
    /// registration order, within `callback_timeout` (unset: 5 s or half of `timeout`,
    /// whichever is less; kept out of `timeout` for them, so they run even when the
    /// drains used every bound), each allowed an equal share of
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

    /// Installs SIGTERM/SIGINT handlers that start the sequence (a second signal
    /// interrupts it), a SIGUSR2 handler that starts a hot upgrade
    /// ([`Lifecycle::upgrade`]), and a SIGHUP handler that only logs, so SIGHUP does not
    /// end the process. Done by start-up when `internal_signal` is true; with
    /// `internal_signal` false start-up installs the SIGUSR2 handler alone, when the
    /// upgrade is enabled ([`Lifecycle::configure_upgrade`] before start-up).
    ///
    /// # Errors
    /// The operating system's error if a handler cannot be installed.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        signals::install(self.clone(), signals::Handled::ALL)
    }

    /// The servers this lifecycle started, for their addresses.
    pub fn servers(&self) -> Vec<ServerHandle> {
        self.inner.protocols.servers()
    }

    /// Hands step 6 something the composition root started beside this lifecycle's own
    /// listeners — the admin endpoint — to close last, after listeners, references and
    /// registries, so that it answers (probes, status) during the whole sequence. An
    /// [`abort`](Lifecycle::abort), including the one that undoes a failed start-up,
    /// closes it too. `close` runs at most once.
    pub fn close_in_step_6<F, Fut>(&self, close: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.inner
            .protocols
            .add_closer(Box::new(move || close().boxed()));
    }

    /// The instances currently registered.
    pub fn registrations(&self) -> Vec<Instance> {
        self.inner.registrations.registered()
    }

    /// Moves the phase forward to `phase` (never back).
    fn advance(&self, phase: Phase) {
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
