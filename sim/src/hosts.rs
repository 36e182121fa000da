//! The software of the simulated hosts: the framework's real `Application`, on
//! turmoil's network and the simulated registry. A provider serves an echo that records
//! each execution; a consumer calls it at a steady rate and records each call.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use rpc::lifecycle::UpgradeResult;
use rpc::transport::Network;
use rpc::{Application, ApplicationError, Config, ConfigFormat, RegistryError, StartError};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use crate::generations::Generations;
use crate::ledger::{CallEnd, Ledger, now};
use crate::network::TurmoilNetwork;
use crate::registry::SimRegistry;

/// The port every provider listens on.
pub const PORT: u16 = 9000;
/// The metadata key carrying a call's id to the provider.
pub const CALL_ID: &str = "sim-call-id";
/// A consumer makes a call this often, whether or not earlier ones have ended (an open
/// load: calls stuck on a paused host do not hold back the next ones, which is what
/// shows where those go).
pub const CALL_INTERVAL: Duration = Duration::from_millis(8);

/// A change to a host's configuration (see `Overrides`).
pub type ConfigChange = Arc<dyn Fn(&mut Config) + Send + Sync>;

/// What an operator asks of a running provider.
#[derive(Clone, Copy, Debug)]
pub enum Command {
    /// The graceful shutdown (SIGTERM).
    Stop,
    /// `POST /offline`.
    Offline,
    /// `POST /online`.
    Online,
    /// A hot upgrade (as `POST /upgrade`): the next generation on the same host.
    Upgrade,
}

/// What every host's software shares with the driver.
pub struct World {
    /// The registry.
    pub registry: SimRegistry,
    /// The record of the run.
    pub ledger: Ledger,
    /// Each host's watch delay.
    pub watch_delays: HashMap<String, Duration>,
    /// When consumers stop calling.
    pub calls_end: Duration,
    /// The consumers' load balance.
    pub load_balance: &'static str,
    /// When consumers record their directories.
    pub run_end: Duration,
    /// The command channel of each running provider (replaced at each start).
    commands: Mutex<HashMap<String, mpsc::UnboundedSender<Command>>>,
    /// Each consumer's next call number, kept across its restarts.
    sequences: Vec<AtomicU32>,
    /// A change to every provider's configuration (see `Overrides`).
    pub provider_change: Option<ConfigChange>,
    /// A change to every consumer's configuration.
    pub consumer_change: Option<ConfigChange>,
}

impl World {
    /// A world for `consumers` consumers.
    pub fn new(
        watch_delays: HashMap<String, Duration>,
        consumers: usize,
        calls_end: Duration,
        run_end: Duration,
    ) -> Self {
        Self {
            registry: SimRegistry::new(),
            ledger: Ledger::default(),
            watch_delays,
            calls_end,
            run_end,
            load_balance: "p2c",
            commands: Mutex::default(),
            sequences: (0..consumers).map(|_| AtomicU32::new(0)).collect(),
            provider_change: None,
            consumer_change: None,
        }
    }

    /// Sends `command` to the provider on `host`; false when none runs there.
    pub fn command(&self, host: &str, command: Command) -> bool {
        self.commands
            .lock()
            .get(host)
            .is_some_and(|sender| sender.send(command).is_ok())
    }

    fn client(&self, host: &str) -> Arc<dyn rpc::core::Registry> {
        let delay = self.watch_delays.get(host).copied().unwrap_or_default();
        self.registry.client(host, delay)
    }
}

fn config(yaml: &str, change: Option<&ConfigChange>, host: &str) -> Config {
    let mut config = Config::from_str(yaml, ConfigFormat::Yaml, host)
        .unwrap_or_else(|error| panic!("the simulator's configuration: {error}"));
    if let Some(change) = change {
        change(&mut config);
    }
    config
}

/// A provider process on `host` (reachable at `ip`): serves until told to stop; an
/// upgrade replaces it by its next generation on the same host.
pub async fn provider(world: Arc<World>, host: String, ip: String) {
    let (sender, mut started) = mpsc::unbounded_channel();
    let generations = generations(world.clone(), host.clone(), ip, sender);
    let (sender, mut commands) = mpsc::unbounded_channel();
    world.commands.lock().insert(host.clone(), sender);
    let start = || generations.builder().start();
    let Some(mut app) = start_supervised(&world, &host, start).await else {
        return;
    };
    while let Some(command) = commands.recv().await {
        let lifecycle = app.lifecycle();
        match command {
            Command::Stop => {
                let report = app.before_shutdown().await;
                let text = format!("{report:?}");
                return world
                    .ledger
                    .stopped(&host, report.total, report.forced(), text);
            }
            Command::Offline => {
                if lifecycle.offline(|_| true).await.is_ok() {
                    world.ledger.offline(&host);
                }
            }
            Command::Online => {
                world.ledger.online(&host);
                drop(lifecycle.online(|_| true).await);
            }
            Command::Upgrade => {
                if let Some(next) = upgrade(&world, &host, &app, &mut started).await {
                    let previous = std::mem::replace(&mut app, next);
                    record_drain(&world, &host, previous, app.lifecycle());
                }
            }
        }
    }
}

/// The generations of the provider on `host`: the echo, the host's registry client
/// and network; each started by an upgrade goes to `started`.
fn generations(
    world: Arc<World>,
    host: String,
    ip: String,
    started: mpsc::UnboundedSender<Application>,
) -> Generations {
    // One network per process lineage: its generations share its listener.
    let network = TurmoilNetwork::default();
    let build = move || {
        let yaml = provider_yaml(&host, &ip);
        let config = config(&yaml, world.provider_change.as_ref(), &host);
        let mut builder = Application::builder(config);
        builder.registry("default", world.client(&host));
        builder.network(Network::new(network.clone()));
        builder.service(EchoServer::new(SimEcho {
            world: world.clone(),
            host: host.clone(),
        }));
        builder
    };
    Generations::new(build, started)
}

/// A simulated provider's configuration: bounds of a few seconds, no admin endpoint,
/// metrics or signals; upgrades by the simulator's spawner.
fn provider_yaml(host: &str, ip: &str) -> String {
    format!(
        "application: {{ name: {host}, logging: false }}
protocol: {{ host: \"{ip}\", port: {PORT} }}
admin: {{ enabled: false }}
upgrade: {{ signal: false }}
metrics: {{ enabled: false }}
graceful_shutdown:
  internal_signal: false
  timeout: 5s
  step_timeout: 1s
  consumer_update_wait_time: 300ms
  offline_request_window_timeout: 100ms
"
    )
}

/// Upgrades `app`: its next generation once it took over, `None` (recorded) when the
/// upgrade did not succeed.
async fn upgrade(
    world: &World,
    host: &str,
    app: &Application,
    started: &mut mpsc::UnboundedReceiver<Application>,
) -> Option<Application> {
    let report = app.upgrade().await;
    if report.result != UpgradeResult::Succeeded {
        world.ledger.upgrade_failed(host, report.to_string());
        return None;
    }
    // The spawner sent the generation before it said ready.
    started.recv().await
}

/// Records the drain of a generation that handed over, once it ends; the next
/// generation (`next`) refuses upgrades until then.
fn record_drain(world: &Arc<World>, host: &str, previous: Application, next: &rpc::Lifecycle) {
    let (ended, gone) = tokio::sync::oneshot::channel::<()>();
    next.predecessor_alive(async move {
        let _ = gone.await;
    });
    let (world, host) = (world.clone(), host.to_owned());
    tokio::spawn(async move {
        let report = previous.wait().await;
        let text = format!("{report:?}");
        world
            .ledger
            .drained(&host, report.total, report.forced(), text);
        drop(ended);
    });
}

/// How long a supervisor waits before it starts a process that failed again
/// (systemd's `RestartSec`).
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Starts a process with `start`, and as a supervisor does, again after
/// [`RESTART_DELAY`] while it fails because the registry cannot be reached (the
/// framework's start-up fails then, as Dubbo's does with `registry.check`); `None`,
/// recorded, when it fails otherwise.
async fn start_supervised<T, F, Fut>(world: &World, host: &str, start: F) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApplicationError>>,
{
    loop {
        match start().await {
            Ok(started) => return Some(started),
            Err(error) if registry_unreachable(&error) => {
                world.ledger.start_retried(host, error.to_string());
                tokio::time::sleep(RESTART_DELAY).await;
            }
            Err(error) => {
                world.ledger.start_failed(host, error.to_string());
                return None;
            }
        }
    }
}

/// Whether start-up failed because a registry did not answer.
fn registry_unreachable(error: &ApplicationError) -> bool {
    matches!(
        error,
        ApplicationError::Start(
            StartError::Register {
                source: RegistryError::Unreachable { .. },
                ..
            } | StartError::Subscribe {
                source: RegistryError::Unreachable { .. },
                ..
            }
        )
    )
}

/// The echo a provider serves: records the execution, works a few milliseconds.
struct SimEcho {
    world: Arc<World>,
    host: String,
}

#[tonic::async_trait]
impl Echo for SimEcho {
    async fn echo(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let id: u64 = request
            .metadata()
            .get(CALL_ID)
            .and_then(|value| value.to_str().ok()?.parse().ok())
            .ok_or_else(|| Status::invalid_argument("no call id"))?;
        self.world.ledger.executed(id, &self.host);
        // 1–20 ms of work, fixed by the call's id.
        tokio::time::sleep(Duration::from_millis(
            1 + id.wrapping_mul(2_654_435_761) % 20,
        ))
        .await;
        Ok(Response::new(EchoReply {
            payload: request.into_inner().payload,
            provider: self.host.clone(),
        }))
    }
}

/// A consumer process: calls every [`CALL_INTERVAL`] until the calls end, then
/// records its directory when the run ends.
pub async fn consumer(world: Arc<World>, index: usize, host: String) {
    let yaml = consumer_yaml(&host, world.load_balance);
    let start = || {
        let mut builder =
            Application::builder(config(&yaml, world.consumer_change.as_ref(), &host));
        builder.registry("default", world.client(&host));
        builder.network(Network::new(TurmoilNetwork::default()));
        let channel = builder.reference("echo.Echo");
        async move { Ok((builder.start().await?, channel)) }
    };
    let Some((app, channel)) = start_supervised(&world, &host, start).await else {
        return;
    };
    world.ledger.consumer_started(index);
    let client = EchoClient::new(channel.clone());
    let mut calls = tokio::task::JoinSet::new();
    let mut ticks = tokio::time::interval(CALL_INTERVAL);
    while now() < world.calls_end {
        ticks.tick().await;
        calls.spawn(call(world.clone(), index, client.clone()));
    }
    while calls.join_next().await.is_some() {}
    tokio::time::sleep(world.run_end.saturating_sub(now())).await;
    let addresses = app.references()[0]
        .directory()
        .list()
        .invokers()
        .iter()
        .map(|invoker| invoker.instance().authority())
        .collect();
    world.ledger.directory(index, addresses);
    std::future::pending::<()>().await;
}

/// A simulated consumer's configuration: one echo reference, failover with 2 retries,
/// a 3 s timeout and `load_balance`; no admin endpoint, upgrade, metrics or signals.
pub fn consumer_yaml(name: &str, load_balance: &str) -> String {
    format!(
        "application: {{ name: {name}, logging: false }}
admin: {{ enabled: false }}
upgrade: {{ enabled: false }}
metrics: {{ enabled: false }}
graceful_shutdown: {{ internal_signal: false }}
consumer:
  check: false
  references:
    echo.Echo: {{ cluster: failover, retries: 2, timeout: 3s, loadbalance: {load_balance} }}
"
    )
}

/// One call, recorded in the ledger.
async fn call(world: Arc<World>, consumer: usize, mut client: EchoClient<rpc::ReferenceChannel>) {
    let sequence = world.sequences[consumer].fetch_add(1, Ordering::Relaxed);
    let id = (consumer as u64) << 32 | u64::from(sequence);
    let mut request = Request::new(EchoRequest {
        payload: id.to_le_bytes().to_vec().into(),
        delay_ms: None,
    });
    request
        .metadata_mut()
        .insert(CALL_ID, id.to_string().parse().expect("digits"));
    world.ledger.started(id, consumer);
    let end = match client.echo(request).await {
        Ok(reply) => CallEnd::Answered(reply.into_inner().provider),
        Err(status) => CallEnd::Failed(status.code(), status.message().to_owned()),
    };
    world.ledger.ended(id, end);
}
