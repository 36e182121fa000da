//! One consumer of the fleet: the framework's real `Application` with one reference —
//! directory, blacklist, load balance, failover, transport — on a runtime of its own
//! whose clock is paused (it advances whenever every task waits), reached by the
//! registry's pushes and dialing the stand-ins in memory. It calls at a steady rate
//! from before the roll to after it, then checks that its directory holds exactly the
//! new generation.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rpc::transport::Network;
use rpc::{Application, Config, ConfigFormat, ReferenceChannel};
use tokio::time::Instant;
use tonic::Request;

use super::FleetSpec;
use super::plan::RollPlan;
use super::registry::PushClient;
use super::standin::StandInNetwork;
use super::tally::{ConsumerTally, TallySummary};
use crate::hosts::{CALL_ID, consumer_yaml};
use crate::schedule::LOAD_BALANCES;

/// Longest a consumer hears of a push after the registry sent it.
pub const MAX_WATCH_DELAY: Duration = Duration::from_millis(200);

/// What one consumer's run came to.
#[derive(Debug)]
pub struct ConsumerOutcome {
    /// Its calls and what the stand-ins did with them.
    pub tally: TallySummary,
    /// Its directory did not hold exactly the new generation at the end: what it held
    /// too much and what it missed (the first few of each).
    pub unconverged: Option<(Vec<String>, Vec<String>)>,
    /// It did not start.
    pub start_failed: Option<String>,
    /// What `measure` read at the end, while the consumer still ran, and how many of
    /// its invokers were connected then.
    pub measured: Option<(usize, usize)>,
}

/// Read at the end of a consumer's run (the heap it holds, say).
pub type Measure<'a> = &'a dyn Fn() -> usize;

/// Runs consumer `index` through the whole roll; counts pushes it received in
/// `deliveries`; reads `measure` at the end, before anything of the consumer is freed.
pub fn run(
    plan: &Arc<RollPlan>,
    spec: &FleetSpec,
    index: usize,
    deliveries: &Arc<AtomicU64>,
    measure: Option<Measure<'_>>,
) -> ConsumerOutcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let seed = spec.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    rpc::cluster::seed_this_thread(seed);
    let mut rng = SmallRng::seed_from_u64(seed);
    let delay = Duration::from_micros(rng.random_range(0..MAX_WATCH_DELAY.as_micros() as u64));
    let load_balance = LOAD_BALANCES[rng.random_range(0..LOAD_BALANCES.len())];
    runtime.block_on(async {
        let origin = Instant::now();
        let tally = Arc::new(ConsumerTally::default());
        let registry = PushClient::new(plan.clone(), origin, delay, deliveries.clone());
        let network = StandInNetwork::new(plan.clone(), origin, tally.clone());
        let mut builder = Application::builder(config(index, load_balance));
        builder.registry("default", Arc::new(registry));
        builder.network(Network::new(network));
        let channel = builder.reference("echo.Echo");
        let app = match builder.start().await {
            Ok(app) => app,
            Err(error) => {
                return ConsumerOutcome {
                    tally: tally.summary(),
                    unconverged: None,
                    start_failed: Some(error.to_string()),
                    measured: None,
                };
            }
        };
        call_through_the_roll(plan, spec, (index, origin), &tally, channel).await;
        // Once the last push has reached this consumer, its directory must hold the new
        // generation: checked every simulated millisecond, for at most two watch delays.
        let last_push = plan.pushes.last().map_or(Duration::ZERO, |push| push.at);
        let give_up = origin + last_push + 2 * MAX_WATCH_DELAY;
        tokio::time::sleep_until(origin + last_push).await;
        let wanted = plan.final_authorities();
        let held = |app: &Application| -> Vec<String> {
            let list = app.references()[0].directory().list();
            list.invokers()
                .iter()
                .map(|invoker| invoker.instance().authority())
                .collect()
        };
        let mut unconverged = compare(held(&app), &wanted);
        while unconverged.is_some() && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(1)).await;
            unconverged = compare(held(&app), &wanted);
        }
        let measured = measure.map(|measure| {
            let list = app.references()[0].directory().list();
            let connected = list.invokers().iter().filter(|i| i.is_connected()).count();
            (measure(), connected)
        });
        ConsumerOutcome {
            tally: tally.summary(),
            unconverged,
            start_failed: None,
            measured,
        }
    })
}

fn config(index: usize, load_balance: &str) -> Config {
    let yaml = consumer_yaml(&format!("consumer-{index}"), load_balance);
    Config::from_str(&yaml, ConfigFormat::Yaml, "fleet consumer")
        .unwrap_or_else(|error| panic!("the fleet consumer's configuration: {error}"))
}

/// Calls every `spec.call_interval` (an open load: a slow call does not hold back the
/// next) from the start until one second after the roll, and waits for every call.
async fn call_through_the_roll(
    plan: &RollPlan,
    spec: &FleetSpec,
    (index, origin): (usize, Instant),
    tally: &Arc<ConsumerTally>,
    channel: ReferenceChannel,
) {
    let end = origin + plan.roll.1 + Duration::from_secs(1);
    let client = EchoClient::new(channel);
    let mut calls = tokio::task::JoinSet::new();
    let mut ticks = tokio::time::interval(spec.call_interval);
    let mut sequence = 0u64;
    while Instant::now() < end {
        ticks.tick().await;
        sequence += 1;
        let id = (index as u64) << 32 | sequence;
        calls.spawn(call(client.clone(), tally.clone(), id));
    }
    while calls.join_next().await.is_some() {}
}

/// One call, counted in `tally`.
async fn call(mut client: EchoClient<ReferenceChannel>, tally: Arc<ConsumerTally>, id: u64) {
    tally.note_call();
    let mut request = Request::new(EchoRequest {
        payload: id.to_le_bytes().to_vec().into(),
        delay_ms: None,
    });
    request
        .metadata_mut()
        .insert(CALL_ID, id.to_string().parse().expect("digits"));
    if let Err(status) = client.echo(request).await {
        tally.note_failed(id, format!("{:?}: {}", status.code(), status.message()));
    }
}

/// `None` when `held` is `wanted`; else what it held too much and what it missed.
fn compare(mut held: Vec<String>, wanted: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    held.sort_unstable();
    if held == wanted {
        return None;
    }
    Some((first_not_in(&held, wanted), first_not_in(wanted, &held)))
}

/// The first five of `these` (sorted) that `others` (sorted) lacks.
fn first_not_in(these: &[String], others: &[String]) -> Vec<String> {
    these
        .iter()
        .filter(|authority| others.binary_search(authority).is_err())
        .take(5)
        .cloned()
        .collect()
}
