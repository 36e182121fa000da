//! Why an application could not be built or started.

use rpc_core::RegistryError;
use rpc_lifecycle::StartError;

use crate::admin::AdminError;
use crate::config::ConfigError;

/// Why an application could not be built or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplicationError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A registry could not be built or reached.
    #[error("registry `{name}`: {source}")]
    Registry {
        /// Its name under `registries`.
        name: String,
        /// The registry's error.
        source: RegistryError,
    },
    /// A reference names a registry that is not configured.
    #[error("consumer.registry names `{0}`, which is not under `registries`")]
    UnknownRegistry(String),
    /// `protocol.host` is not an IP address.
    #[error("protocol.host `{0}` is not an IP address")]
    InvalidHost(String),
    /// Start-up failed (and was undone).
    #[error(transparent)]
    Start(#[from] StartError),
    /// Not a failure: the process was started to check its configuration
    /// (`RPC_UPGRADE=check`, by a hot upgrade) and the check passed; nothing was started.
    /// The old process has already been told (over the descriptor it gave this one), so
    /// the exit code `main` chooses does not decide the upgrade;
    /// [`ApplicationError::exit_code`] maps it to 0.
    #[error("configuration checked (RPC_UPGRADE=check): nothing was started")]
    Checked,
    /// This process was started by a hot upgrade, but what its predecessor handed over
    /// is missing or unusable.
    #[error("hot upgrade: {0}")]
    Upgrade(String),
    /// The admin endpoint could not start (its message names the `admin.*` key).
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A reference found no provider at start-up ([`StartError::NoProvider`]) while this
    /// application provides the same interface under another group or version: most
    /// likely the two were meant to agree. Start-up was undone.
    #[error("{source}; {hint}")]
    NoMatchingProvider {
        /// The [`StartError::NoProvider`] (boxed: it is large, and this error is rare).
        source: Box<StartError>,
        /// What this application provides instead, and what to set.
        hint: String,
    },
    /// The provider's listener could not be bound on `protocol.host`:`protocol.port`
    /// (typically the port is in use: another instance on this host?). Start-up was undone.
    #[error("protocol.port {port}: {source}; {hint}")]
    Listen {
        /// The port asked for.
        port: u16,
        /// The [`StartError::Transport`] that says why (boxed: it is large, and rare).
        source: Box<StartError>,
        /// What to set, and where: the configuration file or `RPC_PROTOCOL__PORT`.
        hint: String,
    },
}

impl ApplicationError {
    /// The exit code a binary's `main` exits with after this error: 0 for a passed
    /// configuration check and for a start interrupted by a shutdown signal (a clean
    /// stop), 2 for an invalid configuration (restarting cannot fix it; systemd units use
    /// `RestartPreventExitStatus=2`), 1 otherwise. Library code never ends the process.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Checked | Self::Start(StartError::Interrupted) => 0,
            Self::Config(_) | Self::UnknownRegistry(_) | Self::InvalidHost(_) => 2,
            _ => 1,
        }
    }
}
