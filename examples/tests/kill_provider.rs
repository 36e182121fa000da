//! Issue 12, rule 3: `kill -9` costs at most what was in flight.
//!
//! Three providers run as child processes of `rolling-deploy` (its `--mode processes`
//! child role, registered in a real etcd, ZooKeeper or Nacos); a consumer in this
//! process sends a non-idempotent method open-loop through the registry; one provider
//! gets SIGKILL in the middle of the load. It never unregisters: it stays in the
//! registry until its lease or session expires (etcd's lease TTL, ZooKeeper's session
//! timeout, Nacos's heartbeat timeout), so the consumer must stop sending to it on its
//! own, from the refused connections. The rule, measured on every call:
//!
//! - the calls that fail are at most the calls in flight on the killed provider at the
//!   moment of the kill (those may have run: a non-idempotent call cannot be re-sent).
//!   That count is the consumer's own, taken apart from the calls' results: the
//!   attempts in flight on the victim's invoker just before SIGKILL, plus the attempts
//!   it dispatched to the victim until it had seen the victim fail (the kill is not one
//!   instant: until the consumer reads the reset, a call can still be written into the
//!   dying process's socket — seen once in four runs, a call sent 0.15 ms after
//!   SIGKILL);
//! - a call that certainly did not reach the dead provider (refused connection) is sent
//!   elsewhere, so no call that *started* after the victim was reaped and the consumer
//!   had seen it fail fails (an order of events, not a grace period).
//!
//! The server URLs come from `RPC_TEST_*_URL` (scripts/test.sh starts the servers); a
//! test whose variable is unset prints SKIPPED unless `RPC_TEST_REQUIRE_REGISTRIES=1`.
//! The tests live here, not in tests/tests/, because they run the `rolling-deploy`
//! binary of this package.

use std::sync::Arc;
use std::time::Duration;

use lossless_rpc::cluster::LoadBalanceKind;
use lossless_rpc::{Application, Config, ReferenceChannel};
use parking_lot::Mutex;
use proto::echo::echo_client::EchoClient;
use rpc_examples::rolling::{self, BACKEND_GROUP, Fleet, Instance, Role};
use rpc_testkit::echo_calls::{echo_once, until_every_provider_answers};
use tokio::time::Instant;

/// Requests per second, open loop.
const RATE: u64 = 200;
/// How long the load runs.
const LOAD: Duration = Duration::from_secs(8);
/// When the provider is killed, from the start of the load.
const KILL_AT: Duration = Duration::from_secs(3);
/// Provider work per request: enough that calls are in flight when the kill comes.
const WORK_MS: u32 = 30;
/// Each call's own deadline: no call outlives the test.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the consumer seeing every provider before the load starts.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the consumer seeing the victim fail after the kill (an event, waited for).
const SEEN_DEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// One call of the load, its times relative to the start of the load.
#[derive(Debug)]
struct CallRecord {
    start: Duration,
    end: Duration,
    result: Result<String, tonic::Status>,
}

/// What the run measured.
#[derive(Debug)]
struct Figures {
    sent: usize,
    failed: usize,
    /// Failed calls that started after the kill window closed (see [`Kill`]).
    failed_after_window: usize,
    failed_started_after_kill: usize,
    served_by_victim_after_kill: usize,
    samples: Vec<String>,
}

impl Figures {
    fn of(calls: &[CallRecord], kill: &Kill, victim: &str) -> Self {
        let failed: Vec<_> = calls.iter().filter(|c| c.result.is_err()).collect();
        Self {
            sent: calls.len(),
            failed: failed.len(),
            failed_after_window: failed
                .iter()
                .filter(|c| c.start > kill.window_closed)
                .count(),
            failed_started_after_kill: failed.iter().filter(|c| c.start > kill.signalled).count(),
            served_by_victim_after_kill: calls
                .iter()
                .filter(|c| c.end > kill.reaped && c.result.as_deref().is_ok_and(|p| p == victim))
                .count(),
            samples: failed
                .iter()
                .take(5)
                .map(|c| format!("{:?} after start: {:?}", c.start, c.result))
                .collect(),
        }
    }
}

/// The registry URL in `var`, or `None` (SKIPPED) when it is unset.
fn registry_url(var: &str) -> Option<String> {
    let Ok(url) = std::env::var(var) else {
        assert!(
            std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
            "{var} is not set but RPC_TEST_REQUIRE_REGISTRIES is"
        );
        println!("SKIPPED: {var} is not set (scripts/test.sh starts the registries)");
        return None;
    };
    Some(url)
}

/// A consumer of the providers' `echo.Echo` through the registry at `url`; the method
/// is not idempotent (the default), so only calls that certainly did not run may be
/// sent again.
async fn consumer(
    url: &str,
    loadbalance: LoadBalanceKind,
) -> (Application, EchoClient<ReferenceChannel>) {
    let mut config = Config::default();
    config.application.name = "kill-test-consumer".to_owned();
    config.application.logging = false;
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    config
        .registries
        .get_mut("default")
        .expect("default registry")
        .url = url.to_owned();
    let entry = config
        .consumer
        .references
        .entry("echo.Echo".to_owned())
        .or_default();
    entry.group = BACKEND_GROUP.to_owned();
    entry.loadbalance = loadbalance;
    // Short ejections: the dead instance, still in the registry, is probed again and
    // again during the load, and each probe's refused connection must be re-sent.
    config.consumer.blacklist.base_ejection_time = Duration::from_millis(500);
    config.consumer.blacklist.max_ejection_time = Duration::from_secs(2);
    let mut builder = Application::builder(config);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let app = builder.start().await.expect("the consumer starts");
    (app, client)
}

async fn call(client: EchoClient<ReferenceChannel>) -> Result<String, tonic::Status> {
    echo_once(client, CALL_TIMEOUT).await
}

/// Calls until every address in `addrs` has answered (the consumer knows them all).
async fn until_all_known(client: &EchoClient<ReferenceChannel>, addrs: &[String]) {
    until_every_provider_answers(client, addrs, CALL_TIMEOUT, DISCOVERY_TIMEOUT).await;
}

/// When the kill happened, relative to the start of the load, and what the consumer
/// had in flight on the victim then.
#[derive(Clone, Copy, Debug)]
struct Kill {
    /// Just before SIGKILL was sent.
    signalled: Duration,
    /// Once the process was reaped (its sockets are closed by then).
    reaped: Duration,
    /// The later of `reaped` and the consumer's first failure on the victim: from then
    /// on it knows the connection is gone, and every attempt is a refused dial.
    window_closed: Duration,
    /// Attempts the consumer had in flight on the victim just before SIGKILL, plus
    /// those it dispatched to it until `window_closed`: every call that can have been
    /// lost in the victim. Counted from the victim's invoker, not from results.
    in_flight_on_victim: u64,
}

/// Sends `RATE × LOAD` calls on schedule and kills `victim` at `KILL_AT`; returns every
/// call's record and when the kill happened. `invoker` is the consumer's view of the
/// victim.
async fn load_with_kill(
    client: &EchoClient<ReferenceChannel>,
    victim: Instance,
    invoker: Arc<lossless_rpc::cluster::Invoker>,
) -> (Vec<CallRecord>, Kill) {
    let records = Arc::new(Mutex::new(Vec::new()));
    let epoch = Instant::now();
    let total = RATE * LOAD.as_secs();
    let sender = {
        let client = client.clone();
        let records = records.clone();
        tokio::spawn(async move {
            let mut calls = Vec::new();
            for n in 0..total {
                tokio::time::sleep_until(epoch + Duration::from_micros(n * 1_000_000 / RATE)).await;
                let client = client.clone();
                let records = records.clone();
                calls.push(tokio::spawn(async move {
                    let start = epoch.elapsed();
                    let result = call(client).await;
                    let end = epoch.elapsed();
                    records.lock().push(CallRecord { start, end, result });
                }));
            }
            for call in calls {
                let _ = call.await;
            }
        })
    };
    tokio::time::sleep_until(epoch + KILL_AT).await;
    let dispatched_before = invoker.stats().dispatched;
    let active_before = invoker.active() as u64;
    let signalled = epoch.elapsed();
    let report = victim.stop(false).await;
    let reaped = epoch.elapsed();
    assert!(report.is_none(), "SIGKILL leaves no report");
    // The consumer sees the victim fail: its calls in flight reset, or its next dial
    // refused. Polled, so the dispatch count read is that of the moment it was seen.
    let seen_dead = tokio::time::timeout(SEEN_DEAD_TIMEOUT, async {
        loop {
            let stats = invoker.stats();
            if let Some(since) = stats.failing_since {
                return (since, stats.dispatched);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the consumer saw the killed provider fail");
    let (failed_at, dispatched_then) = seen_dead;
    let kill = Kill {
        signalled,
        reaped,
        window_closed: reaped.max(failed_at.saturating_duration_since(epoch)),
        in_flight_on_victim: active_before + (dispatched_then - dispatched_before),
    };
    tokio::time::timeout(LOAD + CALL_TIMEOUT * 2, sender)
        .await
        .expect("the load ends")
        .expect("the sender does not panic");
    let records = std::mem::take(&mut *records.lock());
    (records, kill)
}

/// Three providers as processes on the registry in `var`, one killed under load; the
/// consumer balances with `loadbalance`.
async fn kill_one_of_three(var: &str, loadbalance: LoadBalanceKind) {
    let Some(url) = registry_url(var) else {
        return;
    };
    let options = rolling::Options {
        mode: rolling::Mode::Processes,
        registry: url.clone(),
        executable: env!("CARGO_BIN_EXE_rolling-deploy").into(),
        work_ms: WORK_MS,
        progress: false,
        ..Default::default()
    };
    let fleet = Fleet::new(&options).await.expect("the registry answers");
    // Each child is killed when its handle drops (also if this test panics), and closes
    // itself if this process dies (its stdin closes).
    let mut providers = Vec::new();
    for n in 0..3 {
        let provider = fleet
            .start(Role::Provider, &format!("kill-test-provider-{n}"))
            .await
            .expect("the provider starts");
        providers.push(provider);
    }
    let addrs: Vec<String> = providers.iter().map(Instance::addr).collect();
    let (app, client) = consumer(&url, loadbalance.clone()).await;
    until_all_known(&client, &addrs).await;

    let victim = providers.remove(0);
    let victim_addr = victim.addr();
    let invoker = app.references()[0]
        .directory()
        .list()
        .invokers()
        .iter()
        .find(|invoker| invoker.authority() == victim_addr)
        .cloned()
        .expect("the consumer knows the victim");
    let (calls, kill) = load_with_kill(&client, victim, invoker).await;
    let figures = Figures::of(&calls, &kill, &victim_addr);
    println!(
        "kill -9 on {var} ({loadbalance:?}): sent {}, failed {}, in flight on the victim {} \
         (the consumer's count), failed that started after the kill {} / after the kill \
         window {}; {:?}",
        figures.sent,
        figures.failed,
        kill.in_flight_on_victim,
        figures.failed_started_after_kill,
        figures.failed_after_window,
        kill,
    );

    let stats = app.references()[0].stats();
    println!(
        "  consumer: {} calls re-sent after a refused connection (not sent), {} rerouted, \
         {} ejections, {} retries refused by the retry budget; retries by kind {:?}",
        stats.retries_after(lossless_rpc::cluster::FailureKind::NotSent),
        stats.reroutes,
        stats.blacklist.ejections,
        stats.budget_exhausted,
        stats.retries_by_kind,
    );
    for provider in providers {
        let report = provider.stop(true).await.expect("a graceful stop reports");
        assert_eq!(report.exit_code(), 0, "{report}");
    }
    app.abort().await;

    assert_eq!(figures.sent as u64, RATE * LOAD.as_secs());
    assert_eq!(figures.served_by_victim_after_kill, 0);
    assert_eq!(
        figures.failed_after_window, 0,
        "calls started after the victim was reaped and seen failing failed: {:?}",
        figures.samples
    );
    assert!(
        figures.failed as u64 <= kill.in_flight_on_victim,
        "more calls failed ({}) than were in flight on the killed provider ({}): {:?}",
        figures.failed,
        kill.in_flight_on_victim,
        figures.samples
    );
}

/// Round-robin keeps picking the dead instance until it is ejected: the refused
/// connections must be re-sent elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_on_etcd_fails_at_most_what_was_in_flight() {
    kill_one_of_three("RPC_TEST_ETCD_URL", LoadBalanceKind::RoundRobin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_on_zookeeper_fails_at_most_what_was_in_flight() {
    kill_one_of_three("RPC_TEST_ZOOKEEPER_URL", LoadBalanceKind::RoundRobin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_on_nacos_fails_at_most_what_was_in_flight() {
    kill_one_of_three("RPC_TEST_NACOS_URL", LoadBalanceKind::RoundRobin).await;
}

/// The default balance (P2C over peak-EWMA latency) steers away from the dead instance
/// by itself: the failures of the calls in flight enter its latency estimate as at
/// least the failure penalty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_the_default_balance_fails_at_most_what_was_in_flight() {
    kill_one_of_three("RPC_TEST_ETCD_URL", LoadBalanceKind::P2c).await;
}
