//! The `upgrade` configuration section.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Settings of the hot upgrade (a new binary on the same socket), as the `upgrade`
/// section of the configuration spells them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct UpgradeConfig {
    /// Whether this process can be hot-upgraded at all. Default true. When false every
    /// trigger is refused with [`Refusal::Disabled`](super::Refusal::Disabled) (the admin
    /// endpoint answers 409 with the reason; SIGUSR2 is logged and otherwise ignored).
    ///
    /// Set it false in a Kubernetes pod (deploy/kubernetes/configmap.yaml does): a
    /// container ends with its first process, so the new process would die with the old
    /// one; a rolling update replaces pods instead. It is not guessed from the
    /// environment (such as `KUBERNETES_SERVICE_HOST`): a variable says where a process
    /// runs, not whether its exit ends its container, and a setting written in the
    /// configuration is one an operator and a test can read.
    pub enabled: bool,
    /// Whether SIGUSR2 starts an upgrade. Default true. When false the upgrade is
    /// started only by `POST /upgrade` and `Application::upgrade` (for a process whose
    /// SIGUSR2 means something else, or one that runs applications without a signal
    /// driver: the fleet simulator's hosts); with `graceful_shutdown.internal_signal`
    /// on, SIGUSR2 is still read (so that its default action does not end the process),
    /// and only logged; with both off no handler is installed (do not send it).
    pub signal: bool,
    /// The binary to start. Default: the path of this process's executable, read at
    /// start-up, so that installing a new build over that file and triggering runs the
    /// new build (see `process::Program::current`). Set it when deploys switch a
    /// symbolic link.
    pub binary: Option<PathBuf>,
    /// Bound on the new binary's configuration check, and on its start until it reports
    /// ready (it registers first, so include the registry connection, `consumer.check`
    /// and readiness gates). Default 30 s; any value is allowed.
    #[serde(with = "humantime_serde", alias = "ready-timeout")]
    pub ready_timeout: Duration,
    /// A file each process writes its pid to, atomically (a new file renamed over the
    /// old), once it is ready: for a service manager's `PIDFile=` or a script. Default
    /// none.
    #[serde(alias = "pid-file")]
    pub pid_file: Option<PathBuf>,
}

impl Default for UpgradeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            signal: true,
            binary: None,
            ready_timeout: Duration::from_secs(30),
            pid_file: None,
        }
    }
}
