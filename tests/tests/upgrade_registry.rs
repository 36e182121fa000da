//! Registry continuity of the hot upgrade, per backend, against the real servers: a
//! second client (the new process) registers the *same* instance, the first (the old
//! process) releases it and closes, and a watcher sees the instance throughout — and
//! still after the first client's lease or session is gone.
//!
//! And the same hand-over with the old generation in a process of its own
//! (`registry_child`) paused (SIGSTOP) past its lease or session right after the new
//! generation registered (issue 36): resumed, it registers its own instances again
//! under a new lease or session but leaves the new generation's entry alone, and its
//! release and close then leave it too (etcd and ZooKeeper, whose servers compare an
//! entry's owner; Nacos cannot, see "Ownership" in `rpc_registry::nacos`).
//!
//! Servers and scopes as in the registry conformance suite (`RPC_TEST_*_URL`, SKIPPED
//! without them unless `RPC_TEST_REQUIRE_REGISTRIES=1`).

#[path = "registry_conformance/backends.rs"]
#[allow(dead_code)]
mod backends;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use backends::{Fixture, Kind, Presence, report};
use futures_util::StreamExt;
use parking_lot::Mutex;
use rpc_core::{Instance, Registry, Snapshot};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
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

/// Bound on an old process registering again once resumed.
const REREGISTER_BOUND: Duration = Duration::from_secs(30);
/// Bound on each line awaited from an old process.
const ANSWER_BOUND: Duration = Duration::from_secs(20);

/// An old generation in a process of its own (`registry_child`): told what to do on its
/// standard input, paused and resumed with signals; killed when dropped.
struct OldProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl OldProcess {
    /// Starts it registering `handed` and `own` at `url`; returns once they are.
    async fn start(url: &str, handed: &Instance, own: &Instance) -> Self {
        let spec = serde_json::json!({ "url": url, "instance": handed, "also": [own] });
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_registry_child"))
            .arg(spec.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the old generation's process");
        let stdin = child.stdin.take().expect("piped");
        let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut old = Self {
            child,
            stdin,
            lines,
        };
        old.answer("REGISTERED").await;
        old
    }

    /// Waits (bounded) for the line `expected`.
    async fn answer(&mut self, expected: &str) {
        let line = tokio::time::timeout(ANSWER_BOUND, self.lines.next_line()).await;
        match line {
            Ok(Ok(Some(line))) if line.trim_end() == expected => {}
            other => panic!("the old process did not answer {expected}: {other:?}"),
        }
    }

    /// Sends `command`, waits for `answer`.
    async fn command(&mut self, command: &str, answer: &str) {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("the old process reads its commands");
        self.answer(answer).await;
    }

    /// SIGSTOP or SIGCONT.
    fn signal(&self, signal: &str) {
        let pid = self
            .child
            .id()
            .expect("a running child has a pid")
            .to_string();
        let sent = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "{signal} reaches the old process");
    }

    /// Waits (bounded) for it to exit, successfully.
    async fn exited(mut self) {
        let status = tokio::time::timeout(ANSWER_BOUND, self.child.wait())
            .await
            .expect("the old process exits after its close")
            .expect("wait for the old process");
        assert!(status.success(), "the old process exited with {status}");
    }
}

/// The hand-over with the old generation paused past its lease or session.
async fn paused_through_the_hand_over(f: Fixture) {
    // `handed`'s key sorts before `own`'s: a renewal writes them in order, so once `own`
    // is back, whatever the old generation did to `handed` is done.
    let handed =
        Instance::new(f.service("handed"), "127.0.0.1", 27401).with_metadata("generation", "1");
    let own = Instance::new(f.service("own"), "127.0.0.1", 27402);
    let mut old = OldProcess::start(&f.url(Presence::Short), &handed, &own).await;
    let new = f.client(Presence::Short).await;
    let watcher = f.client(Presence::Long).await;
    let seen = watch(&watcher, &handed).await;
    let seen_own = watch(&watcher, &own).await;
    let has = |instance: &Instance| {
        let id = instance.id.clone();
        move |s: &Seen| {
            s.snapshots
                .last()
                .is_some_and(|(_, last)| last.instances.iter().any(|i| i.id == id))
        }
    };
    until(
        &seen,
        &handed,
        f.propagation_bound(),
        "the instance appears",
        has(&handed),
    )
    .await;
    until(
        &seen_own,
        &own,
        f.propagation_bound(),
        "the old process's own instance appears",
        has(&own),
    )
    .await;

    let mut second = handed.clone();
    second.metadata.insert("generation".into(), "2".into());
    new.register(&second)
        .await
        .expect("the new generation registers the same instance");
    let successor = f.owner(&handed).await.expect("the new generation's entry");

    old.signal("-STOP");
    let paused = Instant::now();
    let gone = |s: &Seen| !has(&own)(s);
    until(
        &seen_own,
        &own,
        f.expiry_bound(),
        "the paused process's lease or session expires",
        gone,
    )
    .await;
    old.signal("-CONT");
    until(
        &seen_own,
        &own,
        REREGISTER_BOUND,
        "the resumed process registers its own instance again",
        has(&own),
    )
    .await;
    let resumed_after = paused.elapsed();
    assert_eq!(
        f.owner(&handed).await,
        Some(successor),
        "the resumed old generation left the new generation's entry alone"
    );

    // The rest of the hand-over, as the upgrade does it.
    old.command("release", "RELEASED").await;
    old.command("close", "CLOSED").await;
    old.exited().await;
    assert_eq!(
        f.owner(&handed).await,
        Some(successor),
        "the old generation's release and exit left the new generation's entry"
    );
    // A marker after the old generation's end: every snapshot its end caused came before.
    let marker = Instance::new(handed.service.clone(), "127.0.0.1", 27403);
    new.register(&marker).await.expect("new registers a marker");
    until(
        &seen,
        &handed,
        f.propagation_bound(),
        "the marker shows",
        has(&marker),
    )
    .await;
    {
        let seen = seen.lock();
        assert_eq!(
            seen.gaps(&handed),
            Vec::<u64>::new(),
            "absent in these snapshots: {:?}",
            seen.summary(&handed)
        );
        assert_eq!(seen.last_generation(&handed).as_deref(), Some("2"));
    }
    report(format_args!(
        "{}: the old generation, paused past its lease/session and resumed ({:.1} s), left the new generation's entry listed throughout",
        f.kind.name(),
        resumed_after.as_secs_f64()
    ));
    new.close().await.expect("new closes");
    until(
        &seen,
        &handed,
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

async fn run_paused(kind: Kind, name: &str) {
    let Some(fixture) = Fixture::new(kind, name) else {
        return;
    };
    tokio::time::timeout(TEST_BOUND, paused_through_the_hand_over(fixture))
        .await
        .unwrap_or_else(|_| panic!("{name} did not finish within {TEST_BOUND:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_an_old_generation_paused_past_its_lease_leaves_the_new_generation_s_entry() {
    run_paused(Kind::Etcd, "upgrade-paused-etcd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_an_old_generation_paused_past_its_session_leaves_the_new_generation_s_entry() {
    run_paused(Kind::ZooKeeper, "upgrade-paused-zookeeper").await;
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
