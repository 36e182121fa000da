//! What the upgrade sequence drives and tells, without knowing processes or systemd:
//! the [`Spawner`] that starts the new binary (the real one is
//! `process::successor::ProcessSpawner`; tests use fakes), the [`Successor`] it started,
//! and an [`UpgradeListener`] told of the progress.

use std::any::Any;

use async_trait::async_trait;

use rpc_core::Instance;
use rpc_transport::ListenFds;

use super::Refusal;

/// What the old process hands to the new one.
#[derive(Debug)]
pub struct Handoff {
    /// The listening sockets, named (`grpc`, and `admin` when the application adds it).
    pub listeners: ListenFds,
    /// The instances registered now: the new process registers the same ones (same ids).
    pub instances: Vec<Instance>,
    /// The instances of services manually offline (`Lifecycle::offline`): the new
    /// process starts them offline, under the same ids, and registers them only when
    /// they are brought online.
    pub offline: Vec<Instance>,
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

    /// The binary it starts, for the upgrade's log. Default: none named.
    fn binary(&self) -> Option<&std::path::Path> {
        None
    }

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
/// `RELOADING=1`, `MAINPID=` + `READY=1`, `READY=1`: see `lossless_rpc::systemd`).
pub trait UpgradeListener: Send + Sync + 'static {
    /// An upgrade began.
    fn started(&self) {}
    /// A SIGUSR2 was refused (`refusal`), so no upgrade began. A service manager that
    /// sent the signal may be waiting for the reload it asked for to end (systemd's
    /// `Type=notify-reload`). Not called for refusals of other triggers: their caller
    /// hears the refusal itself.
    fn signal_refused(&self, _refusal: Refusal) {}
    /// It failed: this process goes on serving.
    fn failed(&self) {}
    /// Process `pid` took over (called before this process stops accepting).
    fn handed_over(&self, _pid: u32) {}
}
