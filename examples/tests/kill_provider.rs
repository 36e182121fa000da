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
//!   Which provider a failed call was on is not known, so the bound is the calls in
//!   flight at the kill that no surviving provider answered. The kill is not one
//!   instant: from SIGKILL to the process reaped (the `Kill` window) a call may still be
//!   written into the dying process's socket and be reset; such a call counts as in
//!   flight at the kill (seen once in four runs: a call sent 0.15 ms after SIGKILL);
//! - a call that certainly did not reach the dead provider (refused connection) is sent
//!   elsewhere, so no call that *started* more than 1 s after the kill fails.
//!
//! The server URLs come from `RPC_TEST_*_URL` (scripts/test.sh starts the servers); a
//! test whose variable is unset prints SKIPPED unless `RPC_TEST_REQUIRE_REGISTRIES=1`.
//! The tests live here, not in tests/tests/, because they run the `rolling-deploy`
//! binary of this package.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::echo::echo_client::EchoClient;
use rpc::cluster::LoadBalanceKind;
use rpc::{Application, Config, ReferenceChannel};
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
/// From this long after the kill no call may fail.
const GRACE: Duration = Duration::from_secs(1);

/// One test at a time: two loads at once on a small machine starve each other's timers.
static ONE_LOAD_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    failed_after_grace: usize,
    failed_started_after_kill: usize,
    in_flight_at_kill: usize,
    /// Calls in flight at the kill that a surviving provider did not answer: at most
    /// this many were in flight on the killed one.
    in_flight_not_on_survivors: usize,
    served_by_victim_after_kill: usize,
    samples: Vec<String>,
}

impl Figures {
    fn of(calls: &[CallRecord], kill: Kill, victim: &str) -> Self {
        let Kill { signalled, reaped } = kill;
        let failed: Vec<_> = calls.iter().filter(|c| c.result.is_err()).collect();
        let in_flight: Vec<_> = calls
            .iter()
            .filter(|c| c.start <= reaped && c.end > signalled)
            .collect();
        Self {
            sent: calls.len(),
            failed: failed.len(),
            failed_after_grace: failed
                .iter()
                .filter(|c| c.start > signalled + GRACE)
                .count(),
            failed_started_after_kill: failed.iter().filter(|c| c.start > signalled).count(),
            in_flight_at_kill: in_flight.len(),
            in_flight_not_on_survivors: in_flight
                .iter()
                .filter(|c| !c.result.as_deref().is_ok_and(|p| p != victim))
                .count(),
            served_by_victim_after_kill: calls
                .iter()
                .filter(|c| c.end > reaped && c.result.as_deref().is_ok_and(|p| p == victim))
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
    config.consumer.references.insert(
        "echo.Echo".to_owned(),
        rpc::cluster::ReferenceConfig {
            group: BACKEND_GROUP.to_owned(),
            loadbalance,
            ..Default::default()
        },
    );
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

/// When the kill happened, relative to the start of the load.
#[derive(Clone, Copy, Debug)]
struct Kill {
    /// Just before SIGKILL was sent.
    signalled: Duration,
    /// Once the process was reaped (its sockets are closed by then).
    reaped: Duration,
}

/// Sends `RATE × LOAD` calls on schedule and kills `victim` at `KILL_AT`; returns every
/// call's record and when the kill happened.
async fn load_with_kill(
    client: &EchoClient<ReferenceChannel>,
    victim: Instance,
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
    let signalled = epoch.elapsed();
    let report = victim.stop(false).await;
    let kill = Kill {
        signalled,
        reaped: epoch.elapsed(),
    };
    assert!(report.is_none(), "SIGKILL leaves no report");
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
    let _load = ONE_LOAD_AT_A_TIME.lock().await;
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
    let (calls, kill) = load_with_kill(&client, victim).await;
    let figures = Figures::of(&calls, kill, &victim_addr);
    println!(
        "kill -9 on {var} ({loadbalance:?}): sent {}, failed {}, failed after kill+1s {}, in flight at kill {} \
         (on all 3 providers; at most {} on the killed one), failed that started after the \
         kill {}; {:?}",
        figures.sent,
        figures.failed,
        figures.failed_after_grace,
        figures.in_flight_at_kill,
        figures.in_flight_not_on_survivors,
        figures.failed_started_after_kill,
        kill,
    );

    let stats = app.references()[0].stats();
    println!(
        "  consumer: {} calls re-sent after a refused connection (not sent), {} rerouted, \
         {} ejections, {} retries refused by the retry budget; retries by kind {:?}",
        stats.retries_after(rpc::cluster::FailureKind::NotSent),
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
        figures.failed_after_grace, 0,
        "calls started more than {GRACE:?} after the kill failed: {:?}",
        figures.samples
    );
    assert!(
        figures.failed <= figures.in_flight_not_on_survivors,
        "more calls failed ({}) than were in flight on the killed provider ({} at most): {:?}",
        figures.failed,
        figures.in_flight_not_on_survivors,
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
