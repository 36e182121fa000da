//! Registry continuity of the hot upgrade, per backend, against the real servers: a
//! second client (the new process) registers the *same* instance, the first (the old
//! process) releases it and closes, and a watcher sees the instance throughout — and
//! still after the first client's lease or session is gone.
//!
//! Servers and scopes as in the registry conformance suite (`RPC_TEST_*_URL`, SKIPPED
//! without them unless `RPC_TEST_REQUIRE_REGISTRIES=1`).

#[path = "registry_conformance/backends.rs"]
#[allow(dead_code)]
mod backends;

use std::sync::Arc;
use std::time::Duration;

use backends::{Fixture, Kind, Presence, report};
use futures_util::StreamExt;
use parking_lot::Mutex;
use rpc_core::{Instance, Registry, Snapshot};
use tokio::time::Instant;

/// Every test ends within this bound, whatever happens.
const TEST_BOUND: Duration = Duration::from_secs(90);

/// What a watcher saw: every snapshot, in order, with when it arrived.
#[derive(Default)]
struct Seen {
    snapshots: Vec<(Instant, Snapshot)>,
}

impl Seen {
    /// Snapshots after the instance first appeared that lack it (by id).
    fn gaps(&self, instance: &Instance) -> Vec<u64> {
        let has = |s: &Snapshot| s.instances.iter().any(|i| i.id == instance.id);
        self.snapshots
            .iter()
            .skip_while(|(_, s)| !has(s))
            .filter(|(_, s)| !has(s))
            .map(|(_, s)| s.revision)
            .collect()
    }

    /// Each snapshot as `revision:generation` (`-` when the instance is absent).
    fn summary(&self, instance: &Instance) -> Vec<String> {
        self.snapshots
            .iter()
            .map(|(_, s)| {
                let generation = s
                    .instances
                    .iter()
                    .find(|i| i.id == instance.id)
                    .and_then(|i| i.metadata.get("generation").cloned())
                    .unwrap_or_else(|| "-".into());
                format!("{}:{generation}", s.revision)
            })
            .collect()
    }

    /// The generation (metadata) of the instance in the last snapshot.
    fn last_generation(&self, instance: &Instance) -> Option<String> {
        let (_, last) = self.snapshots.last()?;
        let found = last.instances.iter().find(|i| i.id == instance.id)?;
        found.metadata.get("generation").cloned()
    }
}

/// Watches `instance`'s service through `watcher`, recording every snapshot.
async fn watch(watcher: &Arc<dyn Registry>, instance: &Instance) -> Arc<Mutex<Seen>> {
    let mut subscription = watcher
        .subscribe(&instance.service)
        .await
        .expect("subscribe");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Some(snapshot) = subscription.next().await {
            record.lock().snapshots.push((Instant::now(), snapshot));
        }
    });
    seen
}

/// Waits (bounded) until `check` holds for what was seen (`instance`'s generations
/// are printed when it does not).
async fn until(
    seen: &Mutex<Seen>,
    instance: &Instance,
    within: Duration,
    what: &str,
    check: impl Fn(&Seen) -> bool,
) {
    let deadline = Instant::now() + within;
    while !check(&seen.lock()) {
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {what}; seen {:?}",
            seen.lock().summary(instance)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The hand-over, as the upgrade does it, on one backend.
async fn taken_over(f: Fixture) {
    let service = f.service("upgrade");
    // Short presence: an old lease or session that still held the instance would drop
    // it within the expiry bound waited below.
    let old = f.client(Presence::Short).await;
    let new = f.client(Presence::Short).await;
    let watcher = f.client(Presence::Long).await;
    let first = Instance::new(service.clone(), "127.0.0.1", 27001).with_metadata("generation", "1");
    old.register(&first).await.expect("old registers");
    let seen = watch(&watcher, &first).await;
    until(
        &seen,
        &first,
        f.propagation_bound(),
        "the instance appears",
        |s| s.last_generation(&first).as_deref() == Some("1"),
    )
    .await;

    let started = Instant::now();
    let mut second = first.clone();
    second.metadata.insert("generation".into(), "2".into());
    new.register(&second)
        .await
        .expect("new registers the same instance");
    old.release(&first).await.expect("old releases");
    old.close().await.expect("old closes");
    // rnacos lists one instance per address and keeps the first registration's data
    // when a second connection registers the same address (it publishes nothing): the
    // instance moved to the new connection without a visible change. The other
    // backends show the new registration.
    let shown = if f.kind == Kind::Nacos { "1" } else { "2" };
    until(
        &seen,
        &first,
        f.propagation_bound(),
        "the new registration shows",
        |s| s.last_generation(&first).as_deref() == Some(shown),
    )
    .await;
    // Had the old lease or session kept the instance, closing it would have taken the
    // instance with it: a close ends them on the server before it answers (etcd revokes
    // the lease, ZooKeeper closes the session, Nacos deregisters), so that removal is
    // already in the watcher's stream. A marker the new owner registers now comes after
    // it: once the marker is seen, every snapshot the old client's end could cause has
    // arrived — no need to sleep through an expiry.
    let marker = Instance::new(service.clone(), "127.0.0.1", 27002);
    new.register(&marker).await.expect("new registers a marker");
    until(
        &seen,
        &first,
        f.propagation_bound(),
        "the marker shows",
        |s| {
            s.snapshots
                .iter()
                .any(|(_, snapshot)| snapshot.instances.iter().any(|i| i.id == marker.id))
        },
    )
    .await;
    {
        let seen = seen.lock();
        assert_eq!(
            seen.gaps(&first),
            Vec::<u64>::new(),
            "absent in these snapshots: {:?}",
            seen.summary(&first)
        );
        assert_eq!(seen.last_generation(&first).as_deref(), Some(shown));
    }
    report(format_args!(
        "{}: hand-over kept the instance listed through {} snapshots over {:.1} s",
        f.kind.name(),
        seen.lock().snapshots.len(),
        started.elapsed().as_secs_f64()
    ));

    // And the new owner's close still withdraws it.
    new.close().await.expect("new closes");
    until(
        &seen,
        &first,
        f.expiry_bound(),
        "withdrawn by its new owner",
        |s| {
            s.snapshots
                .last()
                .is_some_and(|(_, last)| last.instances.is_empty())
        },
    )
    .await;
    let _ = watcher.close().await;
}

async fn run(kind: Kind, name: &str) {
    let Some(fixture) = Fixture::new(kind, name) else {
        return;
    };
    tokio::time::timeout(TEST_BOUND, taken_over(fixture))
        .await
        .unwrap_or_else(|_| panic!("{name} did not finish within {TEST_BOUND:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_keeps_an_instance_taken_over_by_another_client() {
    run(Kind::Memory, "upgrade-memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_keeps_an_instance_taken_over_by_another_client() {
    run(Kind::Etcd, "upgrade-etcd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_keeps_an_instance_taken_over_by_another_client() {
    run(Kind::ZooKeeper, "upgrade-zookeeper").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_keeps_an_instance_taken_over_by_another_client() {
    run(Kind::Nacos, "upgrade-nacos").await;
}
