//! The registry conformance suite: one test body per rule of the `Registry` contract, run
//! against every backend: the in-process hub and real etcd, ZooKeeper and Nacos (rnacos)
//! servers.
//!
//! The servers' URLs come from `RPC_TEST_ETCD_URL`, `RPC_TEST_ZOOKEEPER_URL` and
//! `RPC_TEST_NACOS_URL` (`eval "$(scripts/registries.sh start)"` starts the servers and sets
//! them). A test whose variable is missing reports itself as SKIPPED on stderr and returns;
//! with `RPC_TEST_REQUIRE_REGISTRIES=1` (as in CI) it fails instead.
//!
//! Each test works in a scope of its own (a key prefix, a root znode, a Nacos group, a
//! memory hub), so the tests run in parallel against one server. Lease and session times
//! are short (2 s) where a rule waits for expiry; every wait is bounded; connections are
//! cut with a loopback proxy; a provider that "dies" is a child process killed with
//! SIGKILL. Latencies are printed (`cargo test ... -- --nocapture` is not needed: they are
//! written past the output capture).

#[path = "registry_conformance/backends.rs"]
mod backends;
#[path = "registry_conformance/ownership.rs"]
mod ownership;
#[path = "registry_conformance/proxy.rs"]
mod proxy;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backends::{Fixture, Kind, Presence, report};
use futures_util::{FutureExt, StreamExt};
use ownership::{
    a_failed_deregistration_is_sent_again_and_holds_across_a_reconnection,
    a_released_entry_stays_with_its_successor_through_the_old_client_s_reconnection,
    an_old_generation_s_unregister_and_close_leave_its_successors_entry,
    an_old_generation_that_lost_its_session_does_not_take_back_its_successors_entry,
};
use proxy::Proxy;
use rpc_core::{
    Instance, Registry, RegistryError, ServiceKey, Snapshot, SnapshotOrigin, Subscription,
};
use tokio::time::Instant;

/// Every test ends within this bound, whatever happens.
const TEST_BOUND: Duration = Duration::from_secs(120);

/// How long the first snapshot of a subscription may take.
const FIRST_SNAPSHOT: Duration = Duration::from_secs(5);
/// Bound on a provider being registered again after its connection is restored (rule
/// 4): a bound on the event, not the rule's figure.
const REREGISTER_BOUND: Duration = Duration::from_secs(30);

/// Runs one rule against one backend, or reports why it is skipped.
async fn run<F, Fut>(kind: Kind, rule: &str, body: F)
where
    F: FnOnce(Fixture) -> Fut,
    Fut: Future<Output = ()>,
{
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
    let Some(fixture) = Fixture::new(kind, rule) else {
        return;
    };
    if tokio::time::timeout(TEST_BOUND, body(fixture))
        .await
        .is_err()
    {
        panic!(
            "{}::{rule} did not finish within {TEST_BOUND:?}",
            kind.name()
        );
    }
}

/// Instantiates every rule for one backend, as `mod <backend> { fn <rule>() }`.
macro_rules! backend {
    ($module:ident, $kind:expr, [$($rule:ident),* $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    super::run($kind, stringify!($rule), super::$rule).await;
                }
            )*
        }
    };
}

/// Instantiates every rule for every backend; the rules about a connection to a server
/// (a session to lose, a registry to become unreachable) only for the network backends:
/// the in-process hub has neither, and a test that could only return at once would
/// show as passed. The rules about a write conditional on its owner only for the
/// backends whose server can compare one (etcd's lease, ZooKeeper's ephemeral owner):
/// nacos-sdk writes again by itself after a reconnection, and Nacos has no conditional
/// write (see "Ownership" in `rpc_registry::nacos`); Nacos has rules of its own.
macro_rules! conformance {
    (
        every backend: [$($rule:ident),* $(,)?],
        network backends: [$($network:ident),* $(,)?],
        owner-compare backends: [$($owned:ident),* $(,)?],
        nacos: [$($nacos:ident),* $(,)?]
    ) => {
        backend!(memory, super::Kind::Memory, [$($rule),*]);
        backend!(etcd, super::Kind::Etcd, [$($rule,)* $($network,)* $($owned),*]);
        backend!(zookeeper, super::Kind::ZooKeeper, [$($rule,)* $($network,)* $($owned),*]);
        backend!(nacos, super::Kind::Nacos, [$($rule,)* $($network,)* $($nacos),*]);
    };
}

conformance!(
    every backend: [
        register_and_unregister_reach_a_subscriber,
        services_and_instances_do_not_cross_talk,
        a_dead_provider_disappears_by_itself,
        a_registration_left_by_an_old_session_does_not_block_a_new_one,
        an_empty_service_yields_an_empty_snapshot_then_changes,
        close_releases_every_registration_subscription_and_session,
        an_old_generation_s_unregister_and_close_leave_its_successors_entry,
        a_released_entry_stays_with_its_successor_through_the_old_client_s_reconnection,
    ],
    network backends: [
        a_provider_registers_again_after_losing_its_session,
        a_subscriber_keeps_its_instances_while_the_registry_is_unreachable,
    ],
    owner-compare backends: [
        an_old_generation_that_lost_its_session_does_not_take_back_its_successors_entry,
    ],
    nacos: [
        a_failed_deregistration_is_sent_again_and_holds_across_a_reconnection,
    ]
);

/// A subscription under test: every snapshot read through it is checked for increasing
/// revisions and for belonging to the subscribed service.
struct Watch {
    service: ServiceKey,
    subscription: Subscription,
    last_revision: Option<u64>,
    /// Every snapshot seen, oldest first.
    seen: Vec<Snapshot>,
}

impl Watch {
    async fn new(registry: &Arc<dyn Registry>, service: &ServiceKey) -> Self {
        let subscription = registry
            .subscribe(service)
            .await
            .unwrap_or_else(|e| panic!("subscribe {service}: {e}"));
        Self {
            service: service.clone(),
            subscription,
            last_revision: None,
            seen: Vec::new(),
        }
    }

    fn check(&mut self, snapshot: Snapshot) -> Snapshot {
        assert_eq!(
            snapshot.service, self.service,
            "a snapshot of another service"
        );
        for instance in snapshot.instances.iter() {
            assert_eq!(
                instance.service, self.service,
                "cross-talk: {instance:?} in a snapshot of {}",
                self.service
            );
        }
        if let Some(last) = self.last_revision {
            assert!(
                snapshot.revision > last,
                "revision went from {last} to {}",
                snapshot.revision
            );
        }
        self.last_revision = Some(snapshot.revision);
        self.seen.push(snapshot.clone());
        snapshot
    }

    /// The next snapshot whose instance ids are `expected`, within `within`.
    async fn until(&mut self, expected: &[&Instance], within: Duration) -> Snapshot {
        let expected: BTreeSet<String> = expected.iter().map(|i| i.id.to_string()).collect();
        let deadline = Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.subscription.next()).await {
                Ok(Some(snapshot)) => {
                    let snapshot = self.check(snapshot);
                    if ids(&snapshot) == expected {
                        return snapshot;
                    }
                }
                Ok(None) => panic!(
                    "{}: the subscription ended while waiting for {expected:?}",
                    self.service
                ),
                Err(_) => panic!(
                    "{}: no snapshot with {expected:?} within {within:?}; seen: {:?}",
                    self.service,
                    self.seen.iter().map(ids).collect::<Vec<_>>()
                ),
            }
        }
    }

    /// Every snapshot that arrives within `window` (the window is the point: it is how long
    /// the registry stays unreachable).
    async fn collect_for(&mut self, window: Duration) -> Vec<Snapshot> {
        let deadline = Instant::now() + window;
        let mut got = Vec::new();
        while let Ok(next) = tokio::time::timeout_at(deadline, self.subscription.next()).await {
            match next {
                Some(snapshot) => got.push(self.check(snapshot)),
                None => panic!("{}: the subscription ended during the outage", self.service),
            }
        }
        got
    }

    /// Snapshots already delivered, without waiting.
    fn drain_ready(&mut self) -> Vec<Snapshot> {
        let mut got = Vec::new();
        while let Some(Some(snapshot)) = self.subscription.next().now_or_never() {
            got.push(self.check(snapshot));
        }
        got
    }

    /// Waits (bounded) for the stream to end, skipping snapshots still queued.
    async fn ended_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, async {
            while self.subscription.next().await.is_some() {}
        })
        .await
        .is_ok()
    }
}

fn ids(snapshot: &Snapshot) -> BTreeSet<String> {
    snapshot
        .instances
        .iter()
        .map(|i| i.id.to_string())
        .collect()
}

fn instance(service: &ServiceKey, port: u16) -> Instance {
    Instance::new(service.clone(), "127.0.0.1", port)
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

async fn close(registry: &Arc<dyn Registry>) {
    registry
        .close()
        .await
        .unwrap_or_else(|e| panic!("close {}: {e}", registry.url()));
}

/// Rule 1: a registration reaches a separate client's subscription with its weight and
/// metadata; an unregistration removes it (an authoritative empty set).
async fn register_and_unregister_reach_a_subscriber(f: Fixture) {
    let service = f.service("greeter");
    let consumer = f.client(Presence::Short).await;
    let provider = f.client(Presence::Short).await;
    let mut watch = Watch::new(&consumer, &service).await;
    watch.until(&[], FIRST_SNAPSHOT).await;

    let greeter = instance(&service, 20001)
        .with_weight(7)
        .with_metadata("zone", "z1")
        .with_metadata("app", "conformance");
    let started = Instant::now();
    provider.register(&greeter).await.expect("register");
    let snapshot = watch.until(&[&greeter], f.propagation_bound()).await;
    let registered = started.elapsed();
    assert_eq!(
        snapshot.instances[0], greeter,
        "the instance arrives with every field"
    );
    assert_eq!(snapshot.origin, SnapshotOrigin::Authoritative);

    let started = Instant::now();
    provider.unregister(&greeter).await.expect("unregister");
    let snapshot = watch.until(&[], f.propagation_bound()).await;
    let unregistered = started.elapsed();
    assert_eq!(
        snapshot.origin,
        SnapshotOrigin::Authoritative,
        "the last instance really left"
    );
    report(format_args!(
        "{}: propagation latency: register {} , unregister {}",
        f.kind.name(),
        ms(registered),
        ms(unregistered)
    ));
    close(&provider).await;
    close(&consumer).await;
}

/// Rule 2: two instances of one service and two services beside it (one differs only by
/// version) from two providers: each subscriber sees exactly its own service's instances.
async fn services_and_instances_do_not_cross_talk(f: Fixture) {
    let service = f.service("shared").with_version("1.0");
    let other_version = f.service("shared").with_version("2.0");
    let other = f.service("other").with_group("g");
    let (one, two) = (
        f.client(Presence::Short).await,
        f.client(Presence::Short).await,
    );
    let consumer = f.client(Presence::Short).await;

    let (a1, a2) = (instance(&service, 21001), instance(&service, 21002));
    let v2 = instance(&other_version, 21003);
    let b = instance(&other, 21004);
    one.register(&a1).await.expect("register a1");
    two.register(&a2).await.expect("register a2");
    one.register(&v2).await.expect("register v2");
    two.register(&b).await.expect("register b");

    let mut watch_a = Watch::new(&consumer, &service).await;
    let mut watch_v2 = Watch::new(&consumer, &other_version).await;
    let mut watch_b = Watch::new(&consumer, &other).await;
    watch_a.until(&[&a1, &a2], f.propagation_bound()).await;
    watch_v2.until(&[&v2], f.propagation_bound()).await;
    watch_b.until(&[&b], f.propagation_bound()).await;

    one.unregister(&a1).await.expect("unregister a1");
    watch_a.until(&[&a2], f.propagation_bound()).await;
    // Whatever the neighbours received meanwhile still lists only their own instance.
    for snapshot in watch_v2.drain_ready() {
        assert_eq!(ids(&snapshot), BTreeSet::from([v2.id.to_string()]));
    }
    for snapshot in watch_b.drain_ready() {
        assert_eq!(ids(&snapshot), BTreeSet::from([b.id.to_string()]));
    }
    for client in [&one, &two, &consumer] {
        close(client).await;
    }
}

/// Rule 3: a provider that dies without unregistering (process killed; for the in-process
/// hub, client dropped) disappears by itself within its session/lease time.
async fn a_dead_provider_disappears_by_itself(f: Fixture) {
    let service = f.service("mortal");
    let consumer = f.client(Presence::Short).await;
    let mut watch = Watch::new(&consumer, &service).await;
    watch.until(&[], FIRST_SNAPSHOT).await;

    let mortal = instance(&service, 22001);
    let mut provider = f.spawn_provider(&mortal).await;
    watch.until(&[&mortal], f.propagation_bound()).await;

    let died = Instant::now();
    provider.die().await;
    let snapshot = watch.until(&[], f.expiry_bound()).await;
    assert_eq!(snapshot.origin, SnapshotOrigin::Authoritative);
    report(format_args!(
        "{}: a killed provider disappeared after {}",
        f.kind.name(),
        ms(died.elapsed())
    ));
    close(&consumer).await;
}

/// Rule 4: after its session/lease is lost (connection cut for longer than the TTL), the
/// provider registers again by itself, under a new session, once it reconnects (a
/// bounded wait for the event; how soon — the rule's 5 s — is measured by the benchmark
/// `benches/benches/registry_reregistration.rs`, a server coming back without the
/// session).
async fn a_provider_registers_again_after_losing_its_session(f: Fixture) {
    assert!(
        f.can_cut(),
        "a_provider_registers_again_after_losing_its_session is a rule for network backends"
    );
    let service = f.service("phoenix");
    let proxy = Proxy::start(f.upstream()).await;
    let provider = f.client_via(proxy.addr(), Presence::Short).await;
    let consumer = f.client(Presence::Short).await;
    let mut watch = Watch::new(&consumer, &service).await;
    watch.until(&[], FIRST_SNAPSHOT).await;

    let phoenix = instance(&service, 23001);
    provider.register(&phoenix).await.expect("register");
    watch.until(&[&phoenix], f.propagation_bound()).await;

    let cut = Instant::now();
    proxy.cut();
    // The server drops the instance when the provider's session/lease/connection is gone.
    watch.until(&[], f.expiry_bound()).await;
    let expired = cut.elapsed();

    proxy.restore();
    let snapshot = watch.until(&[&phoenix], REREGISTER_BOUND).await;
    assert_eq!(snapshot.instances[0], phoenix);
    report(format_args!(
        "{}: session lost {} after the cut; registered again once the connection was restored",
        f.kind.name(),
        ms(expired),
    ));
    close(&provider).await;
    close(&consumer).await;
}

/// Rule 4, continued: a registration of the same instance still held by an old session
/// (the server has not expired it yet) does not block the new session's registration, and
/// the old session's end does not take the new registration with it.
async fn a_registration_left_by_an_old_session_does_not_block_a_new_one(f: Fixture) {
    let service = f.service("successor");
    let old = f.client(Presence::Long).await;
    let new = f.client(Presence::Short).await;
    let consumer = f.client(Presence::Short).await;
    let successor = instance(&service, 23501);
    old.register(&successor)
        .await
        .expect("register in the old session");
    let mut watch = Watch::new(&consumer, &service).await;
    watch.until(&[&successor], f.propagation_bound()).await;

    new.register(&successor)
        .await
        .expect("a registration left by another session does not block");
    close(&old).await;
    let left = f.leftovers(std::slice::from_ref(&service)).await;
    let instances: Vec<&String> = left.iter().filter(|l| !l.contains("subscri")).collect();
    assert_eq!(
        instances.len(),
        1,
        "the new session's registration survives the old one: {left:?}"
    );
    let mut fresh = Watch::new(&consumer, &service).await;
    fresh.until(&[&successor], FIRST_SNAPSHOT).await;
    close(&new).await;
    close(&consumer).await;
}

/// Rule 5: while the registry is unreachable a subscriber keeps its last known instances
/// (no empty authoritative snapshot), and converges to the true state when it returns.
async fn a_subscriber_keeps_its_instances_while_the_registry_is_unreachable(f: Fixture) {
    assert!(
        f.can_cut(),
        "a_subscriber_keeps_its_instances_while_the_registry_is_unreachable is a rule for network backends"
    );
    let service = f.service("steadfast");
    let proxy = Proxy::start(f.upstream()).await;
    let provider = f.client(Presence::Short).await;
    let consumer = f.client_via(proxy.addr(), Presence::Short).await;

    let before = instance(&service, 24001);
    let after = instance(&service, 24002);
    provider.register(&before).await.expect("register");
    let mut watch = Watch::new(&consumer, &service).await;
    watch.until(&[&before], f.propagation_bound()).await;

    proxy.cut();
    // The registry changes while the subscriber cannot see it.
    provider
        .register(&after)
        .await
        .expect("register during the outage");
    provider
        .unregister(&before)
        .await
        .expect("unregister during the outage");
    let during = watch.collect_for(f.outage()).await;
    for snapshot in &during {
        assert!(
            !(snapshot.instances.is_empty() && snapshot.origin == SnapshotOrigin::Authoritative),
            "an empty authoritative snapshot was delivered while the registry was unreachable"
        );
    }
    let degraded = during.iter().filter(|s| s.instances.is_empty()).count();
    assert!(
        degraded <= 1,
        "{degraded} empty (degraded) snapshots during the outage"
    );

    proxy.restore();
    let restored = Instant::now();
    watch.until(&[&after], Duration::from_secs(15)).await;
    report(format_args!(
        "{}: {} snapshot(s) during a {:?} outage; converged {} after the registry returned",
        f.kind.name(),
        during.len(),
        f.outage(),
        ms(restored.elapsed())
    ));
    close(&provider).await;
    close(&consumer).await;
}

/// Rule 6: subscribing to a service nobody registered yields an empty snapshot (not an
/// error), and later registrations arrive.
async fn an_empty_service_yields_an_empty_snapshot_then_changes(f: Fixture) {
    let service = f.service("nobody");
    let consumer = f.client(Presence::Short).await;
    let mut watch = Watch::new(&consumer, &service).await;
    let first = watch.until(&[], FIRST_SNAPSHOT).await;
    assert_eq!(first.origin, SnapshotOrigin::Authoritative);
    assert_eq!(watch.seen.len(), 1, "the first snapshot is the empty one");

    let provider = f.client(Presence::Short).await;
    let late = instance(&service, 25001);
    provider.register(&late).await.expect("register");
    watch.until(&[&late], f.propagation_bound()).await;
    close(&provider).await;
    close(&consumer).await;
}

/// Rule 7: `unsubscribe` ends a stream; `close` withdraws every registration, ends every
/// subscription and releases the session/lease: checked on the server, well before a long
/// TTL could explain it.
async fn close_releases_every_registration_subscription_and_session(f: Fixture) {
    let (first, second) = (f.service("first"), f.service("second"));
    let client = f.client(Presence::Long).await;
    let a = instance(&first, 26001);
    let b = instance(&second, 26002);
    client.register(&a).await.expect("register a");
    client.register(&b).await.expect("register b");
    let mut watch_first = Watch::new(&client, &first).await;
    let mut watch_second = Watch::new(&client, &second).await;
    watch_first.until(&[&a], f.propagation_bound()).await;
    watch_second.until(&[&b], f.propagation_bound()).await;

    let mut extra = Watch::new(&client, &first).await;
    let id = extra.subscription.id();
    client.unsubscribe(id).await.expect("unsubscribe");
    assert!(
        extra.ended_within(Duration::from_secs(3)).await,
        "unsubscribe ends the stream"
    );
    assert!(matches!(
        client.unsubscribe(id).await,
        Err(RegistryError::UnknownSubscription(_))
    ));

    let services = [first.clone(), second.clone()];
    let before = f.leftovers(&services).await;
    assert!(
        before.len() >= 2,
        "the inspector sees both registrations: {before:?}"
    );
    let sessions = f.held_sessions().await;

    let started = Instant::now();
    client.close().await.expect("close");
    assert!(
        watch_first.ended_within(Duration::from_secs(3)).await,
        "close ends every stream"
    );
    assert!(
        watch_second.ended_within(Duration::from_secs(3)).await,
        "close ends every stream"
    );
    // Well under the long TTL (30 s lease, 10 s session): only an explicit release explains it.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = f.leftovers(&services).await;
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left on the server 3 s after close: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let live = f.live_sessions(&sessions).await;
    assert!(live.is_empty(), "sessions still held after close: {live:?}");
    report(format_args!(
        "{}: close released everything in {}",
        f.kind.name(),
        ms(started.elapsed())
    ));
    assert!(matches!(
        client.register(&a).await,
        Err(RegistryError::Closed { .. })
    ));
    assert!(matches!(
        client.subscribe(&first).await,
        Err(RegistryError::Closed { .. })
    ));
}
