//! What a `hot-upgrade` run does: the options, with their defaults.

use std::path::PathBuf;
use std::time::Duration;

/// How the new binary of the planned upgrades behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChildBehaviour {
    /// Starts and takes over.
    #[default]
    Good,
    /// Exits with code 1 before it is ready (a broken build).
    Fail,
    /// Never reports ready (a build that hangs at start-up): killed at `ready_timeout`.
    Hang,
    /// Binds the inherited socket and starts serving, then its readiness gate fails
    /// after 1.5 s (a warm-up that cannot reach what it needs): it exits before ready.
    GateFails,
    /// Binds the inherited socket and starts serving, then its readiness gate never
    /// ends: killed at `ready_timeout`.
    GateHangs,
}

/// How each upgrade is triggered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// SIGUSR2 to the current provider process (what `systemctl reload` sends).
    #[default]
    Signal,
    /// `POST /upgrade` on the provider's admin endpoint.
    Admin,
}

/// What the server streams of a run are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamMode {
    /// Greeter streams of `stream_length` each, replaced as they end: each finishes
    /// within an upgrade's drain.
    #[default]
    Short,
    /// Feed subscriptions (`feed.Feed/Subscribe`, declared resumable) that last the whole
    /// run: at every upgrade the old process's handler moves each one, and the consumer
    /// re-opens it on the new process with no event lost or repeated.
    Resumable,
}

/// A run of the demonstration.
#[derive(Clone, Debug)]
pub struct Options {
    /// Unary requests per second, open-loop.
    pub rate: u32,
    /// How long the load runs; upgrades are spread across it.
    pub duration: Duration,
    /// Upgrades to run.
    pub upgrades: usize,
    /// How each is triggered.
    pub trigger: Trigger,
    /// Registry URL; `None`: the consumer dials the provider's address directly.
    pub registry: Option<String>,
    /// With `Fail` or `Hang`, the first upgrade's new binary misbehaves (the others are
    /// good, so the run shows the next good upgrade succeeding).
    pub child: ChildBehaviour,
    /// The provider's `upgrade.ready_timeout`.
    pub ready_timeout: Duration,
    /// Server streams kept open at all times.
    pub streams: usize,
    /// What the server streams are.
    pub stream_mode: StreamMode,
    /// How long each server stream lasts (short streams).
    pub stream_length: Duration,
    /// Interval between new connections (each dialled, used for one call, closed).
    pub connect_every: Duration,
    /// The binary run as the provider (this program, in its `provider` mode).
    pub executable: PathBuf,
    /// Print a progress line every second.
    pub progress: bool,
    /// Bytes of each unary request's `name`, which the greeting sends back (so about as
    /// much each way); 0 sends the 4-byte `load`. At most [`MAX_MESSAGE_SIZE`].
    pub message_size: usize,
}

/// Largest `message_size`: gRPC's default 4 MiB message limit less the greeting's own
/// words and the message's framing.
pub const MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024 - 64;

impl Options {
    /// The defaults of the runs in docs/hot-upgrade.md: 2 000 req/s for 15 s, 5
    /// upgrades by signal.
    pub fn new(executable: PathBuf) -> Self {
        Self {
            rate: 2000,
            duration: Duration::from_secs(15),
            upgrades: 5,
            trigger: Trigger::Signal,
            registry: None,
            child: ChildBehaviour::Good,
            ready_timeout: Duration::from_secs(3),
            streams: 8,
            stream_mode: StreamMode::Short,
            stream_length: Duration::from_millis(1500),
            connect_every: Duration::from_millis(10),
            executable,
            progress: false,
            message_size: 0,
        }
    }
}
