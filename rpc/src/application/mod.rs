//! `Application`: wires a configuration into registries, references, services and one
//! lifecycle.
//!
//! [`ApplicationBuilder`] (builder.rs) collects what the application provides and
//! references; its start (start.rs) connects the registries and hands the lifecycle a
//! start plan; [`Application`] (here) is what runs afterwards.

mod admin;
mod advertise;
mod agreement;
mod builder;
mod descriptors;
mod error;
mod exported;
mod generations;
mod logging;
mod provider_layers;
mod provider_stack;
mod reflection;
mod start;

use std::future::Future;
use std::net::SocketAddr;

use rpc_cluster::ClusterChannel;
use rpc_core::Phase;
use rpc_lifecycle::UpgradeReport;
use rpc_lifecycle::{Lifecycle, ShutdownReport};
use tokio::sync::watch;

pub use builder::ApplicationBuilder;
pub use error::ApplicationError;
pub use provider_layers::ProviderService;

use crate::config::Config;
use crate::observe::Metrics;
use crate::systemd::NotifierFinished;

/// A started application. Dropping it does not stop it: call
/// [`Application::before_shutdown`] or send SIGTERM.
pub struct Application {
    pub(super) lifecycle: Lifecycle,
    pub(super) local_addr: Option<SocketAddr>,
    pub(super) admin_addr: Option<SocketAddr>,
    pub(super) references: Vec<ClusterChannel>,
    pub(super) metrics: Metrics,
    /// When systemd has been told every phase (see [`crate::systemd`]).
    pub(super) systemd: NotifierFinished,
    /// The references' resumable methods, and what their streams did.
    pub(super) resumable: rpc_cluster::resume::ResumableMethods,
}

impl Application {
    /// A builder for an application configured by `config`.
    pub fn builder(config: Config) -> ApplicationBuilder {
        ApplicationBuilder::new(config)
    }

    /// The application's lifecycle (phase, counters, shutdown).
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// The address providers listen on, if the application provides any service.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// The address the admin endpoint listens on, unless `admin.enabled` is false.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.lifecycle.phase()
    }

    /// A receiver that sees every phase change.
    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.lifecycle.watch_phase()
    }

    /// The application's metrics: [`Metrics::encode`] is what `GET /metrics` serves.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What the resumable streams of this application's references did so far: moved by
    /// their providers, resumed elsewhere, or not resumed (see [`crate::stream`]).
    pub fn resumed_streams(&self) -> rpc_cluster::resume::ResumeCounts {
        self.resumable.counts()
    }

    /// Streams this application's providers ended as moved so far (their handlers were
    /// told the instance goes offline: [`crate::stream::DrainNotice`]).
    pub fn streams_moved(&self) -> usize {
        self.lifecycle.streams().moved()
    }

    /// The cluster channels of this application's references, for their statistics.
    pub fn references(&self) -> &[ClusterChannel] {
        &self.references
    }

    /// The BeforeShutdown hook: runs the graceful shutdown sequence once (later calls
    /// await the same run) and returns its report (under systemd, once `stopped` has
    /// been told to it).
    pub fn before_shutdown(&self) -> impl Future<Output = ShutdownReport> + Send + 'static {
        let shutdown = self.lifecycle.before_shutdown();
        let systemd = self.systemd.clone();
        let metrics = self.metrics.clone();
        async move {
            let report = shutdown.await;
            metrics.record_stop(&report);
            systemd.wait().await;
            report
        }
    }

    /// Waits until the shutdown sequence (started by a signal or by
    /// [`Application::before_shutdown`]) has finished (under systemd, and `stopped` has
    /// been told to it). With `metrics.last_stop_file` set, the report is written there
    /// first.
    pub async fn wait(&self) -> ShutdownReport {
        let report = self.lifecycle.wait().await;
        // Before `main` can exit with the report's code (see `observe::last_stop`).
        self.metrics.record_stop(&report);
        self.systemd.wait().await;
        report
    }

    /// Starts a hot upgrade (what SIGUSR2 does): a new process of this binary takes over
    /// on the same listening socket and the same registrations, then this one drains
    /// and exits ([`Application::wait`] returns). Resolves when the outcome is decided;
    /// refused at once while another upgrade runs, while the previous generation
    /// drains, or while shutting down. See [`crate::upgrade`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn upgrade(&self) -> impl Future<Output = UpgradeReport> + Send + 'static {
        self.lifecycle.upgrade()
    }

    /// Registers a callback for the last shutdown step (see [`Lifecycle::on_shutdown`]).
    pub fn on_shutdown<F, Fut>(&self, callback: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.lifecycle.on_shutdown(callback);
    }

    /// Stops at once, like a killed process (see [`Lifecycle::abort`]): what graceful
    /// offline exists to prevent. For demonstrations and tests.
    pub async fn abort(&self) {
        self.lifecycle.abort().await;
    }
}
