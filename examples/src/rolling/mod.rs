//! `rolling-deploy`: roll every instance of a service chain under load and count every
//! request.
//!
//! One load client sends a fixed rate of `echo.Echo` calls to `proxies` proxies, each of
//! which forwards every call to one of `providers` providers (found through the
//! registry, group `proxy` and group `backend`). While the load runs, every proxy and
//! every provider is restarted, one at a time: with graceful online/offline on, each is
//! stopped by the real shutdown sequence and replaced by a fresh instance on a new port;
//! with it off, each is killed the way a plain restart kills it. At the end the run
//! reports how many requests failed: with `--graceful on` that must be 0.

mod fleet;
mod plot;
mod process;
mod summary;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

pub use fleet::{Fleet, Role};
pub use process::run_child;
pub use summary::{Latency, RestartRecord, Summary};

use crate::load::{self, LoadOptions};

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
    /// Full rolls of every instance.
    pub rounds: usize,
    /// Request payload, in bytes.
    pub payload: usize,
    /// Provider work per request, in ms.
    pub work_ms: u32,
    /// Graceful online/offline on (real shutdown sequence) or off (kill).
    pub graceful: bool,
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
    /// Print a progress line every second (stderr).
    pub progress: bool,
    /// The binary child processes run (`--mode processes`); default: this program.
    pub executable: std::path::PathBuf,
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
            registry: "memory://".to_owned(),
            max_outstanding: load::DEFAULT_MAX_OUTSTANDING,
            registry_delay: Duration::from_millis(300),
            mode: Mode::InProcess,
            progress: true,
            executable: std::env::current_exe().unwrap_or_default(),
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

/// Runs the whole scenario and returns its summary.
///
/// # Errors
/// [`RollingError`] when the options are unusable or an instance cannot start.
pub async fn run(options: Options) -> Result<Summary, RollingError> {
    validate(&options)?;
    let fleet = Fleet::new(&options).await?;
    check_restarts_fit(&options, fleet.propagation())?;
    let mut proxies = Vec::with_capacity(options.proxies);
    let mut providers = Vec::with_capacity(options.providers);
    for n in 0..options.providers {
        providers.push(
            fleet
                .start(Role::Provider, &format!("provider-{n}"))
                .await?,
        );
    }
    for n in 0..options.proxies {
        proxies.push(fleet.start(Role::Proxy, &format!("proxy-{n}")).await?);
    }
    let (client_app, client) = fleet.client().await?;

    let plan = restart_plan(&options);
    let warmup = warmup(options.duration);
    let interval = options.duration.saturating_sub(warmup * 2) / plan.len().max(1) as u32;
    let restarts: Arc<Mutex<Vec<RestartRecord>>> = Arc::default();
    let restarting: Arc<Mutex<Option<String>>> = Arc::default();
    let started = Instant::now();
    let payload = bytes::Bytes::from(vec![b'x'; options.payload]);

    let driver = {
        let restarts = restarts.clone();
        let restarting = restarting.clone();
        let graceful = options.graceful;
        move |load: load::Load| {
            let fleet = fleet.clone();
            tokio::spawn(async move {
                for (index, (role, slot)) in plan.into_iter().enumerate() {
                    tokio::time::sleep_until(started + warmup + interval * index as u32).await;
                    if load.sending_done() {
                        // Restarts after the load would prove nothing: the summary shows
                        // fewer restarts than planned, and the run fails.
                        break;
                    }
                    let instances = match role {
                        Role::Proxy => &mut proxies,
                        Role::Provider => &mut providers,
                    };
                    let name = format!("{}-{slot}", role.name());
                    *restarting.lock() = Some(name.clone());
                    load.set_restarting(true);
                    let at = started.elapsed();
                    let stopping = std::time::Instant::now();
                    let old = instances.remove(slot);
                    let report = old.stop(graceful).await;
                    let stopped_ms = stopping.elapsed().as_secs_f64() * 1e3;
                    let replacement = match fleet.start(role, &name).await {
                        Ok(instance) => instance,
                        Err(error) => {
                            eprintln!("rolling-deploy: {error}");
                            restarts
                                .lock()
                                .push(RestartRecord::failed(&name, at, stopped_ms, report, &error));
                            load.set_restarting(false);
                            *restarting.lock() = None;
                            return (proxies, providers);
                        }
                    };
                    // The new instance is in use once consumers hear of it.
                    tokio::time::sleep(fleet.propagation()).await;
                    restarts.lock().push(RestartRecord::new(
                        &name,
                        at,
                        stopped_ms,
                        report,
                        replacement.addr(),
                    ));
                    instances.insert(slot, replacement);
                    load.set_restarting(false);
                    *restarting.lock() = None;
                }
                (proxies, providers)
            })
        }
    };

    let mut handle = None;
    let record = load::run(
        LoadOptions {
            max_outstanding: options.max_outstanding,
            ..LoadOptions::new(options.rate, options.duration)
        },
        |_| {
            let mut client = client.clone();
            let request = proto::echo::EchoRequest {
                payload: payload.clone(),
                delay_ms: None,
            };
            async move {
                client
                    .echo(request)
                    .await
                    .map(|reply| reply.into_inner().provider)
            }
        },
        |load| {
            if options.progress {
                spawn_progress(load.clone(), restarting.clone(), options.rate);
            }
            handle = Some(driver(load));
        },
    )
    .await;
    let (proxies, providers) = match handle {
        Some(handle) => handle.await.unwrap_or_default(),
        None => Default::default(),
    };

    client_app.before_shutdown().await;
    for instance in proxies.into_iter().chain(providers) {
        instance.stop(true).await;
    }
    let restarts = std::mem::take(&mut *restarts.lock());
    Ok(Summary::new(&options, record, restarts, started.elapsed()))
}

fn validate(options: &Options) -> Result<(), RollingError> {
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
    if options.rounds == 0 {
        return Err(RollingError::Usage("--rounds must be at least 1".into()));
    }
    if options.payload > MAX_PAYLOAD {
        return Err(RollingError::Usage(format!(
            "--payload must be at most {MAX_PAYLOAD} bytes (gRPC's default 4 MiB message limit)"
        )));
    }
    if options.mode == Mode::Processes && options.registry.starts_with("memory:") {
        return Err(RollingError::Usage(
            "--mode processes needs a registry that other processes can reach \
             (--registry etcd://…, zookeeper://… or nacos://…); memory:// exists only inside one process"
                .into(),
        ));
    }
    Ok(())
}

/// Largest payload that fits gRPC's default 4 MiB message limit with the message's framing.
const MAX_PAYLOAD: usize = 4 * 1024 * 1024 - 64;

/// Time one restart needs at least: the provider's offline window (500 ms by default),
/// the registry's propagation to consumers, and a margin to start the replacement.
fn restart_time(propagation: Duration) -> Duration {
    Duration::from_millis(500) + propagation + Duration::from_millis(300)
}

/// Quiet time before the first restart and after the last: a tenth of the run, at most
/// 5 s, so steady-state latency has samples on both sides.
fn warmup(duration: Duration) -> Duration {
    (duration / 10).min(Duration::from_secs(5))
}

/// Refuses a `--duration` too short for the planned restarts: they must all happen while
/// the load runs, or the run proves nothing about them.
fn check_restarts_fit(options: &Options, propagation: Duration) -> Result<(), RollingError> {
    let restarts = restart_plan(options).len() as u32;
    if fits(options.duration, restarts, propagation) {
        return Ok(());
    }
    Err(RollingError::Usage(format!(
        "--duration {} is too short for {restarts} restarts: each needs about {} \
         (offline window, registry propagation, start-up); use at least {}",
        humantime::format_duration(options.duration),
        humantime::format_duration(restart_time(propagation)),
        humantime::format_duration(shortest_duration(restarts, propagation)),
    )))
}

/// Whether `restarts` restarts fit in a run of `duration` between its two quiet times.
fn fits(duration: Duration, restarts: u32, propagation: Duration) -> bool {
    let restarting = restart_time(propagation).saturating_mul(restarts);
    duration >= restarting.saturating_add(warmup(duration) * 2)
}

/// The shortest whole-second `--duration` that [`fits`]. The quiet times grow with the
/// duration (a tenth each, up to 5 s), so this solves for it rather than adding them to
/// the restart time of a too-short run.
fn shortest_duration(restarts: u32, propagation: Duration) -> Duration {
    let restarting = restart_time(propagation).saturating_mul(restarts);
    // Below 50 s each quiet time is a tenth: d ≥ restarting + d/5, so d ≥ 1.25 × restarting.
    let short = restarting.mul_f64(1.25);
    let exact = if short <= Duration::from_secs(50) {
        short
    } else {
        restarting
            .saturating_add(Duration::from_secs(10))
            .max(Duration::from_secs(50))
    };
    let mut whole = Duration::from_secs(exact.as_secs() + u64::from(exact.subsec_nanos() > 0));
    // Guard against rounding in the division by 10.
    while !fits(whole, restarts, propagation) {
        whole += Duration::from_secs(1);
    }
    whole
}

/// Every proxy, then every provider, once per round.
fn restart_plan(options: &Options) -> Vec<(Role, usize)> {
    let one_round = (0..options.proxies)
        .map(|n| (Role::Proxy, n))
        .chain((0..options.providers).map(|n| (Role::Provider, n)));
    (0..options.rounds)
        .flat_map(|_| one_round.clone())
        .collect()
}

fn spawn_progress(load: load::Load, restarting: Arc<Mutex<Option<String>>>, rate: u32) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let mut last_left = 0;
        loop {
            tick.tick().await;
            if load.finished() {
                return;
            }
            // `sent` counts requests due, as the final table does; the rate counts only
            // those that left (not those refused by the in-flight bound).
            let (elapsed, sent, not_sent, ok, failed, p99) = load.with_record(|r| {
                let second = r.seconds.len().saturating_sub(2);
                let p99 = r.p99_ms(second);
                (
                    r.started.elapsed().as_secs(),
                    r.sent,
                    r.not_sent,
                    r.succeeded,
                    r.failed(),
                    p99,
                )
            });
            let restarting = restarting
                .lock()
                .clone()
                .map_or_else(String::new, |n| format!(" | restarting {n}"));
            let left = sent - not_sent;
            let not_sent = if not_sent > 0 {
                format!(" (not sent {not_sent})")
            } else {
                String::new()
            };
            eprintln!(
                "[{elapsed:>3}s] sent {sent:>7} ok {ok:>7} failed {failed:>5}{not_sent} | {:>5} req/s (target {rate}) | p99 {p99:.1} ms{restarting}",
                left.saturating_sub(last_left)
            );
            last_left = left;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advice in the "too short" error is itself accepted, and one second less is not.
    #[test]
    fn advised_duration_fits_and_is_the_shortest() {
        for restarts in [1, 4, 10, 40, 200] {
            for propagation_ms in [0, 300, 500, 1_000] {
                let propagation = Duration::from_millis(propagation_ms);
                let advised = shortest_duration(restarts, propagation);
                assert!(
                    fits(advised, restarts, propagation),
                    "{restarts} {propagation_ms}"
                );
                let shorter = advised - Duration::from_secs(1);
                assert!(
                    !fits(shorter, restarts, propagation),
                    "{restarts} restarts, {propagation_ms} ms: {advised:?} is not the shortest"
                );
            }
        }
    }

    #[test]
    fn the_default_run_fits() {
        let options = Options::default();
        assert!(check_restarts_fit(&options, options.registry_delay).is_ok());
    }
}
