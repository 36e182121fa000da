//! A hot upgrade whose next generation is a new `Application` in the same process
//! (`ApplicationBuilder::upgrade_spawner` and `take_over`), through the public API as a
//! program with a process model of its own uses it: the successor serves on the
//! handed-over socket under the same instance id, and no call made through it fails.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::{Behavior, Scripted};
use futures_util::{FutureExt, StreamExt};
use parking_lot::Mutex;
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::core::Registry;
use rpc::lifecycle::{Handoff, ONLINE_REVISION, Spawner, Successor, UpgradeResult};
use rpc::registry::MemoryHub;
use rpc::{Application, ServiceKey};
use tokio::sync::oneshot;

/// Starts the next generation as a new application in this process.
struct InProcess {
    hub: MemoryHub,
    scripted: Scripted,
    /// Where the started successor goes, for the test to stop it.
    started: Mutex<Option<oneshot::Sender<Application>>>,
}

#[async_trait]
impl Spawner for InProcess {
    async fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn spawn(&self, handoff: Handoff) -> Result<Box<dyn Successor>, String> {
        let mut builder = common::builder("provider", &self.hub, Duration::ZERO);
        builder.service(EchoServer::new(self.scripted.clone()));
        builder.take_over(handoff);
        let started = self.started.lock().take().ok_or("spawned twice")?;
        let (ready, is_ready) = oneshot::channel();
        let start = tokio::spawn(async move {
            match builder.start().await {
                Ok(app) => {
                    let _ = ready.send(Ok(()));
                    let _ = started.send(app);
                }
                Err(error) => drop(ready.send(Err(error.to_string()))),
            }
        });
        Ok(Box::new(InProcessSuccessor { is_ready, start }))
    }
}

struct InProcessSuccessor {
    is_ready: oneshot::Receiver<Result<(), String>>,
    /// The new generation's start-up: stopped if the upgrade gives up on it (not ready
    /// within `ready_timeout`), or it would serve on beside the old one.
    start: tokio::task::JoinHandle<()>,
}

#[async_trait]
impl Successor for InProcessSuccessor {
    fn pid(&self) -> u32 {
        std::process::id()
    }

    async fn ready(&mut self) -> Result<(), String> {
        (&mut self.is_ready)
            .await
            .unwrap_or_else(|_| Err("the start task ended".into()))
    }

    async fn abandon(self: Box<Self>) -> String {
        self.start.abort();
        String::new()
    }

    fn taken_over(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        Box::new(())
    }
}

/// Calls until `stop`, at most 20 000; counts answers and failures.
#[derive(Default)]
struct Calls {
    ok: AtomicUsize,
    failed: AtomicUsize,
    stop: AtomicBool,
}

async fn call_until_stopped(mut client: EchoClient<rpc::ReferenceChannel>, calls: Arc<Calls>) {
    for _ in 0..20_000 {
        if calls.stop.load(Ordering::Relaxed) {
            return;
        }
        let request = EchoRequest {
            payload: bytes::Bytes::from_static(b"x"),
            delay_ms: None,
        };
        match client.echo(request).await {
            Ok(_) => calls.ok.fetch_add(1, Ordering::Relaxed),
            Err(status) => {
                eprintln!("failed: {status}");
                calls.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

/// Waits (bounded: 10 s) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    let wait = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("not within 10 s: {what}"));
}

/// Upgrades `provider`, which must succeed; the successor its spawner sent, and the
/// first generation's drain, each within 10 s.
async fn upgrade(
    provider: &Application,
    successor: oneshot::Receiver<Application>,
) -> (Application, rpc::ShutdownReport) {
    let report = provider.upgrade().await;
    assert_eq!(report.result, UpgradeResult::Succeeded, "{report}");
    let successor = tokio::time::timeout(Duration::from_secs(10), successor)
        .await
        .expect("the successor started within 10 s")
        .expect("the spawner sent it");
    let drained = tokio::time::timeout(Duration::from_secs(10), provider.wait())
        .await
        .expect("the first generation ends within 10 s");
    (successor, drained)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_successor_takes_over_the_socket_and_the_instance_losing_no_call() {
    let hub = MemoryHub::new();
    let key = ServiceKey::new("echo.Echo");
    let (first, second) = (Scripted::new(Behavior::Ok), Scripted::new(Behavior::Ok));
    let (started, successor) = oneshot::channel();
    let mut builder = common::builder("provider", &hub, Duration::ZERO);
    builder.service(EchoServer::new(first.clone()));
    builder.upgrade_spawner(Arc::new(InProcess {
        hub: hub.clone(),
        scripted: second.clone(),
        started: Mutex::new(Some(started)),
    }));
    let provider = builder.start().await.expect("provider starts");
    let address = provider.local_addr().expect("it listens");
    let registered = hub.instances(&key);

    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let consumer = builder.start().await.expect("consumer starts");
    let calls = Arc::new(Calls::default());
    let caller = tokio::spawn(call_until_stopped(client, calls.clone()));
    until("calls reach the first generation", || first.calls() >= 20).await;

    // Every change of the service from here on: none may lack the instance.
    let watcher = hub.client();
    let mut changes = watcher.subscribe(&key).await.expect("a memory watch");
    let (successor, drained) = upgrade(&provider, successor).await;
    assert!(!drained.forced(), "{drained:?}");
    let after_hand_over = second.calls();
    until("calls reach the second generation", || {
        second.calls() >= after_hand_over + 20
    })
    .await;
    calls.stop.store(true, Ordering::Relaxed);
    caller.await.expect("the caller ends");

    assert_eq!(calls.failed.load(Ordering::Relaxed), 0, "no call fails");
    let mut seen = 0;
    while let Some(Some(snapshot)) = changes.next().now_or_never() {
        seen += 1;
        assert_eq!(
            snapshot.instances.len(),
            1,
            "listed throughout: {snapshot:?}"
        );
    }
    assert!(
        seen >= 2,
        "the successor's registration was seen ({seen} snapshots)"
    );
    assert_eq!(successor.local_addr(), Some(address), "the same socket");
    let ids = |instances: Vec<rpc::Instance>| -> Vec<_> {
        instances
            .into_iter()
            .map(|instance| (instance.id, instance.port))
            .collect()
    };
    assert_eq!(
        ids(hub.instances(&key)),
        ids(registered),
        "the same instance id, never withdrawn"
    );
    consumer.before_shutdown().await;
    successor.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_goes_on_from_its_predecessors_online_revision() {
    let hub = MemoryHub::new();
    let key = ServiceKey::new("echo.Echo");
    let (started, successor) = oneshot::channel();
    let mut builder = common::builder("provider", &hub, Duration::ZERO);
    builder.service(EchoServer::new(Scripted::new(Behavior::Ok)));
    builder.upgrade_spawner(Arc::new(InProcess {
        hub: hub.clone(),
        scripted: Scripted::new(Behavior::Ok),
        started: Mutex::new(Some(started)),
    }));
    let provider = builder.start().await.expect("provider starts");
    let revision = || {
        hub.instances(&key)
            .iter()
            .map(|instance| instance.metadata.get(ONLINE_REVISION).cloned())
            .collect::<Vec<_>>()
    };
    provider
        .lifecycle()
        .offline(|_| true)
        .await
        .expect("offline");
    provider.lifecycle().online(|_| true).await.expect("online");
    assert_eq!(revision(), [Some("1".to_owned())]);

    let (successor, _) = upgrade(&provider, successor).await;
    assert_eq!(
        revision(),
        [Some("1".to_owned())],
        "the entry reads as unchanged"
    );
    successor
        .lifecycle()
        .offline(|_| true)
        .await
        .expect("offline");
    successor
        .lifecycle()
        .online(|_| true)
        .await
        .expect("online");
    assert_eq!(
        revision(),
        [Some("2".to_owned())],
        "one higher than any the predecessor wrote"
    );
    successor.before_shutdown().await;
}
