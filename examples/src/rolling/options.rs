//! What a run is asked to do ([`Options`], [`Mode`]), whether that can work, and why a
//! run could not be carried out ([`RollingError`]).

use std::time::Duration;

use rpc_testkit::load;

use super::role::Role;
use super::surge::{self, Bound, Order};

/// How instances run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every instance is its own `Application` in this process, with its own listener,
    /// lifecycle and registry client.
    InProcess,
    /// Every instance is a child process of this binary, restarted by a real SIGTERM
    /// (or SIGKILL with `--graceful off`). Needs a cross-process registry.
    Processes,
}

impl Mode {
    /// `in-process` or `processes`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::InProcess => "in-process",
            Mode::Processes => "processes",
        }
    }
}

/// The long streams of a run, beside the unary load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Streams {
    /// None.
    #[default]
    Off,
    /// `stream_count` feed subscriptions from the load client to the providers
    /// (`feed.Feed/Subscribe`, declared resumable), followed for the whole run: each
    /// provider's stop moves the ones it serves, and the client re-opens them elsewhere.
    Resumable,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Requests per second, open loop.
    pub rate: u32,
    /// How long the load runs.
    pub duration: Duration,
    /// Number of proxies.
    pub proxies: usize,
    /// Number of providers.
    pub providers: usize,
    /// Full rolls of every instance; 0 runs the same load with no restart at all (the
    /// steady state a roll's cost is measured against, as `benches/max-rate.sh` does).
    pub rounds: usize,
    /// Request payload, in bytes.
    pub payload: usize,
    /// Provider work per request, in ms.
    pub work_ms: u32,
    /// Graceful online/offline on (real shutdown sequence) or off (kill).
    pub graceful: bool,
    /// The adaptive concurrency limit (`provider.limit`) on every proxy and provider.
    pub limit: bool,
    /// Registry URL; `memory://` is the embedded default.
    pub registry: String,
    /// Most requests in flight at once; a request due beyond it is not sent and counts
    /// as failed (`ResourceExhausted`). Keeps memory bounded when the rate is more than
    /// the machine can serve. Default [`load::DEFAULT_MAX_OUTSTANDING`].
    pub max_outstanding: usize,
    /// Propagation delay of the in-process registry (ignored for other registries).
    pub registry_delay: Duration,
    /// In-process or child processes.
    pub mode: Mode,
    /// Most instances of a role above its count during a restart (Kubernetes'
    /// `maxSurge`; default 25 %, rounded up). At least 1: the replacement starts first.
    pub max_surge: Bound,
    /// Most instances of a role below its count during a restart (Kubernetes'
    /// `maxUnavailable`; default 25 %, rounded down).
    pub max_unavailable: Bound,
    /// Print a progress line every second (stderr).
    pub progress: bool,
    /// The binary child processes run (`--mode processes`); default: this program.
    pub executable: std::path::PathBuf,
    /// Watch every instance's readiness through its admin endpoint (`GET /ready`).
    pub admin: bool,
    /// Long streams beside the load.
    pub streams: Streams,
    /// How many (with `streams: resumable`).
    pub stream_count: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            rate: 5_000,
            duration: Duration::from_secs(50),
            proxies: 5,
            providers: 5,
            rounds: 1,
            payload: 64,
            work_ms: 1,
            graceful: true,
            limit: false,
            registry: "memory://".to_owned(),
            max_outstanding: load::DEFAULT_MAX_OUTSTANDING,
            registry_delay: Duration::from_millis(300),
            mode: Mode::InProcess,
            max_surge: Bound::DEFAULT,
            max_unavailable: Bound::DEFAULT,
            progress: true,
            executable: std::env::current_exe().unwrap_or_default(),
            admin: false,
            streams: Streams::Off,
            stream_count: 4,
        }
    }
}

/// Why a run could not be carried out (distinct from requests failing, which the
/// summary counts).
#[derive(Debug, thiserror::Error)]
pub enum RollingError {
    /// Options that cannot work together.
    #[error("{0}")]
    Usage(String),
    /// An instance could not be started.
    #[error("starting {name}: {message}")]
    Start {
        /// The instance.
        name: String,
        /// What went wrong.
        message: String,
    },
}

/// Refuses options that cannot work together, naming the flag at fault.
pub(crate) fn validate(options: &Options) -> Result<(), RollingError> {
    if options.proxies == 0 || options.providers == 0 {
        return Err(RollingError::Usage(
            "--proxies and --providers must be at least 1".into(),
        ));
    }
    if options.rate == 0 {
        return Err(RollingError::Usage(
            "--rate must be at least 1 request/s".into(),
        ));
    }
    if options.max_outstanding == 0 {
        return Err(RollingError::Usage(
            "--max-outstanding must be at least 1".into(),
        ));
    }
    if options.payload > MAX_PAYLOAD {
        return Err(RollingError::Usage(format!(
            "--payload must be at most {MAX_PAYLOAD} bytes (gRPC's default 4 MiB message limit)"
        )));
    }
    options.order(Role::Proxy)?;
    options.order(Role::Provider)?;
    if options.mode == Mode::Processes && options.registry.starts_with("memory:") {
        return Err(RollingError::Usage(
            "--mode processes needs a registry that other processes can reach \
             (--registry etcd://…, zookeeper://… or nacos://…); memory:// exists only inside one process"
                .into(),
        ));
    }
    Ok(())
}

impl Options {
    /// How an instance of `role` is replaced, from `max_surge` and `max_unavailable`
    /// resolved for that role's count, as Kubernetes resolves them (see `surge.rs`).
    ///
    /// # Errors
    /// [`RollingError::Usage`] when both bounds are given as 0.
    pub fn order(&self, role: Role) -> Result<Order, RollingError> {
        let instances = match role {
            Role::Proxy => self.proxies,
            Role::Provider => self.providers,
        };
        surge::order(instances, self.max_surge, self.max_unavailable).map_err(RollingError::Usage)
    }
}

/// Largest payload that fits gRPC's default 4 MiB message limit with the message's framing.
const MAX_PAYLOAD: usize = 4 * 1024 * 1024 - 64;
