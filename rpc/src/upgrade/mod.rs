//! The hot upgrade in an application: replace the binary of a running instance without
//! giving up its address, its registrations, or a single request (docs/upgrade.md).
//!
//! SIGUSR2 (handled whenever `upgrade.enabled`, the default, or
//! `graceful_shutdown.internal_signal` is true), `POST /upgrade` on the admin endpoint,
//! or [`Application::upgrade`](crate::Application::upgrade), runs the upgrade's
//! sequence ([`Lifecycle::upgrade`]): the new binary checks its configuration, starts
//! with this process's listening sockets, registers the same instances and reports
//! ready; only then does this process stop accepting, drain and exit, leaving the
//! registrations to the new one.
//!
//! What [`ApplicationBuilder::start`](crate::ApplicationBuilder::start) does for it,
//! depending on how the process was started (`lossless_rpc::lifecycle::process::Role`):
//! - **plain**: serves as usual, on an inherited socket if systemd passed one (socket
//!   activation: `LISTEN_FDS`), and makes upgrades possible;
//! - **check** (`RPC_UPGRADE=check`): checks what the configuration and the code can
//!   tell without starting anything, reports the outcome to the old process over the
//!   descriptor it was given (`lossless_rpc::lifecycle::process::check_report`), and
//!   fails with [`ApplicationError::Checked`] (or the check's error). The report
//!   decides the upgrade, not the exit code: a `main` that exits 1 on any start error
//!   (the getting-started guide's) is upgraded like one that exits with
//!   [`ApplicationError::exit_code`] (0 for `Checked`);
//! - **successor**: serves on the inherited sockets, registers its predecessor's
//!   instances under their ids (those the predecessor had manually offline stay
//!   offline), then tells the predecessor it is ready; upgrades are refused until the
//!   predecessor has exited.
//!
//! Every process writes `upgrade.pid_file` (when set) once it serves.

mod pid_file;
mod spawner;

use std::sync::Arc;

use rpc_core::Instance;
use rpc_lifecycle::Lifecycle;
use rpc_lifecycle::process::check_report::CheckReport;
use rpc_lifecycle::process::predecessor::Predecessor;
use rpc_lifecycle::process::successor::ProcessSpawner;
use rpc_lifecycle::process::{Program, Role};
use rpc_lifecycle::{Export, ExportedService, Handoff, ONLINE_REVISION, Spawner, UpgradeConfig};
use rpc_transport::{GRPC_LISTENER, InheritedListeners};

use crate::ApplicationError;
use crate::admin::AdminListener;
use crate::systemd::UpgradeNotifier;
use spawner::ApplicationSpawner;

/// What start-up needs of the upgrade machinery, read when the builder is made.
pub(crate) struct UpgradeStart {
    role: Role,
    /// This process's own program, read at start-up (see [`Program::current`]).
    program: Option<Program>,
    /// What starts the next generation instead of a new process of `program`
    /// (`ApplicationBuilder::upgrade_spawner`).
    spawner: Option<Arc<dyn Spawner>>,
    /// The hand-over of a previous generation in this same process
    /// (`ApplicationBuilder::take_over`).
    handoff: Option<Handoff>,
}

/// What a new generation takes over from the previous one: the gRPC listening socket
/// (none for a custom network stack's, which the stack shares), and the instances
/// registered and manually offline, whose ids it registers under.
#[derive(Debug, Default)]
pub(crate) struct TakenOver {
    listener: Option<std::net::TcpListener>,
    instances: Vec<Instance>,
    offline: Vec<Instance>,
}

impl UpgradeStart {
    /// Reads this process's role and program.
    pub(crate) fn read() -> Self {
        let program = Program::current()
            .inspect_err(|error| tracing::warn!(%error, "cannot read this process's executable path; upgrades need upgrade.binary"))
            .ok();
        Self {
            role: Role::current(),
            program,
            spawner: None,
            handoff: None,
        }
    }

    /// Starts the next generation with `spawner` instead of a new process.
    pub(crate) fn set_spawner(&mut self, spawner: Arc<dyn Spawner>) {
        self.spawner = Some(spawner);
    }

    /// Makes this application the next generation of the one that handed over
    /// `handoff` in this process.
    pub(crate) fn set_handoff(&mut self, handoff: Handoff) {
        self.handoff = Some(handoff);
    }

    /// Whether this process only checks its configuration.
    pub(crate) fn is_check(&self) -> bool {
        self.role == Role::Check
    }

    /// The hand-over from the predecessor, when this process is a successor.
    ///
    /// # Errors
    /// Why, when it is a successor without a usable hand-over (start-up fails with
    /// `ApplicationError::Upgrade`).
    pub(crate) fn predecessor(&self) -> Result<Option<Predecessor>, String> {
        if self.role != Role::Successor {
            return Ok(None);
        }
        Predecessor::from_env().map_err(|error| format!("hand-over: {error}"))
    }

    /// What this application takes over: from the previous generation in this process
    /// (`take_over`), else from the `predecessor` process, else the listener systemd
    /// passed (socket activation), if any.
    ///
    /// # Errors
    /// When the gRPC listener handed over in this process is not a usable listening
    /// socket.
    pub(crate) fn taken_over(
        &mut self,
        predecessor: Option<&Predecessor>,
    ) -> Result<TakenOver, String> {
        if let Some(mut handoff) = self.handoff.take() {
            let listener = handoff
                .listeners
                .take(GRPC_LISTENER)
                .map(rpc_transport::listener_from)
                .transpose()
                .map_err(|error| format!("hand-over: the gRPC listener: {error}"))?;
            return Ok(TakenOver {
                listener,
                instances: handoff.instances,
                offline: handoff.offline,
            });
        }
        let listener = InheritedListeners::global().take(GRPC_LISTENER);
        let (instances, offline) = predecessor
            .map(|p| (p.instances().to_vec(), p.offline().to_vec()))
            .unwrap_or_default();
        Ok(TakenOver {
            listener,
            instances,
            offline,
        })
    }

    /// Makes upgrades of `lifecycle` possible, starting `config.binary` or this
    /// process's own program with the same arguments, handing over the gRPC listener
    /// and the `admin` endpoint's, when it serves.
    pub(crate) fn configure(
        &self,
        lifecycle: &Lifecycle,
        config: &UpgradeConfig,
        admin: Option<AdminListener>,
    ) {
        if let Some(spawner) = &self.spawner {
            lifecycle.configure_upgrade(config.clone(), spawner.clone(), None);
            return;
        }
        let program = match (&config.binary, &self.program) {
            (Some(binary), program) => Program {
                binary: binary.clone(),
                args: program.as_ref().map(|p| p.args.clone()).unwrap_or_default(),
            },
            (None, Some(program)) => program.clone(),
            (None, None) => return,
        };
        lifecycle.configure_upgrade(
            config.clone(),
            Arc::new(ApplicationSpawner::new(ProcessSpawner::new(program), admin)),
            Some(Arc::new(UpgradeNotifier)),
        );
    }
}

/// Reports a configuration check's outcome (`checked`) to the old process that started
/// this one to check it, and returns what `start()` returns: [`ApplicationError::Checked`]
/// when it passed, else the check's error. A report that cannot be sent is logged: the
/// old process then decides by the exit code.
pub(crate) fn report_check(checked: Result<(), ApplicationError>) -> ApplicationError {
    let (report, error) = match checked {
        Ok(()) => (CheckReport::Passed, ApplicationError::Checked),
        Err(error) => (CheckReport::Failed(error.to_string()), error),
    };
    if let Err(send) = report.send() {
        tracing::warn!(error = %send, "cannot report the configuration check to the old process; it decides by the exit code");
    }
    error
}

/// Serves `export` on the listening socket `taken` holds, if any (socket activation,
/// a successor), and registers its services under the previous generation's instance
/// ids.
pub(crate) fn inherit(export: &mut Export, taken: TakenOver) {
    if let Some(listener) = taken.listener {
        if let Ok(addr) = listener.local_addr()
            && addr != export.bind
            && export.bind.port() != 0
        {
            tracing::warn!(configured = %export.bind, inherited = %addr, "serving on the inherited socket, not on the configured address");
        }
        export.listener = Some(listener);
    }
    for service in &mut export.services {
        if let Some(instance) = taken
            .instances
            .iter()
            .find(|instance| instance.service == service.key)
        {
            take_identity(service, instance);
        } else if let Some(instance) = taken
            .offline
            .iter()
            .find(|instance| instance.service == service.key)
        {
            // The operator took it offline in the previous generation: it stays so.
            take_identity(service, instance);
            service.offline = true;
        }
    }
}

/// Registers `service` as its predecessor's `instance`: under its id, and with its
/// online revision, so that the entry reads as unchanged and this process's first
/// online writes one higher than any the predecessor wrote (one written anew as "1"
/// could equal an entry the predecessor left listed, and consumers would keep its
/// closing mark: `lossless_rpc::lifecycle::ONLINE_REVISION`).
fn take_identity(service: &mut ExportedService, instance: &Instance) {
    service.instance_id = Some(instance.id.clone());
    if let Some(revision) = instance.metadata.get(ONLINE_REVISION) {
        service
            .metadata
            .insert(ONLINE_REVISION.to_owned(), revision.clone());
    }
}

/// Once `lifecycle` serves: writes the pid file, and as a successor tells the
/// predecessor it is ready (upgrades are refused until the predecessor has exited).
///
/// A predecessor that cannot be told is gone (it died: one that gives up on this
/// process kills it first). This process then serves on, alone: withdrawing its
/// registrations would remove the very instances it serves.
pub(crate) async fn serving(
    lifecycle: &Lifecycle,
    config: &UpgradeConfig,
    predecessor: Option<Predecessor>,
) {
    if let Some(path) = &config.pid_file
        && let Err(error) = pid_file::write(path)
    {
        tracing::warn!(path = %path.display(), %error, "cannot write the pid file");
    }
    let Some(predecessor) = predecessor else {
        return;
    };
    match predecessor.announce_ready().await {
        Ok(alive) => {
            tracing::info!(app = %lifecycle.name(), "ready; the previous generation hands over");
            lifecycle.predecessor_alive(alive.gone());
        }
        Err(error) => {
            tracing::warn!(app = %lifecycle.name(), %error, "the previous generation is gone before it heard this one is ready; serving on");
        }
    }
}

#[cfg(test)]
mod tests {
    use rpc_core::ServiceKey;

    use super::*;

    #[test]
    fn a_successor_registers_its_predecessors_instance_and_online_revision() {
        let key = ServiceKey::new("a.B");
        let mut predecessor = Instance::new(key.clone(), "127.0.0.1", 1);
        predecessor
            .metadata
            .insert(ONLINE_REVISION.to_owned(), "3".to_owned());
        let mut service = ExportedService::new(key.clone());
        service.metadata.insert("zone".to_owned(), "a".to_owned());
        take_identity(&mut service, &predecessor);
        assert_eq!(service.instance_id.as_ref(), Some(&predecessor.id));
        assert_eq!(
            service.metadata.get(ONLINE_REVISION).map(String::as_str),
            Some("3")
        );
        assert_eq!(service.metadata.get("zone").map(String::as_str), Some("a"));

        // A predecessor that never went online by hand wrote none: neither does this one.
        let mut service = ExportedService::new(key.clone());
        take_identity(&mut service, &Instance::new(key, "127.0.0.1", 1));
        assert!(!service.metadata.contains_key(ONLINE_REVISION));
    }
}
