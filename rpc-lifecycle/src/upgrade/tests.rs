//! The upgrade's sequence on tokio's clock, with a fake spawner: one at a time, every
//! failure leaves the old process serving with its new process reaped, a shutdown cuts
//! a start short, and a hand-over releases registrations instead of withdrawing them.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::*;
use crate::ShutdownReport;
use crate::{Export, ExportedService, ShutdownConfig, StartPlan, TrafficError};
use rpc_core::{Instance, ServiceKey};
use rpc_core::{Registry, RegistryError, Subscription, SubscriptionId};

/// What the fake new process does.
#[derive(Clone, Debug)]
enum Behaviour {
    /// Its check fails with this message.
    BadConfig(&'static str),
    /// It exits before ready, with this on stderr.
    Exits(&'static str),
    /// It never says ready.
    Hangs,
    /// It is ready after this long.
    ReadyAfter(Duration),
}

#[derive(Default)]
struct Record {
    checks: AtomicUsize,
    spawns: AtomicUsize,
    abandoned: AtomicUsize,
    taken_over: AtomicUsize,
    /// Listener names and instance count of each hand-off.
    handoffs: Mutex<Vec<(usize, usize)>>,
    /// Offline instances of each hand-off.
    offline: Mutex<Vec<usize>>,
}

struct FakeSpawner {
    behaviour: Mutex<Behaviour>,
    record: Arc<Record>,
}

#[async_trait]
impl Spawner for FakeSpawner {
    async fn check(&self) -> Result<(), String> {
        self.record.checks.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(10)).await;
        match *self.behaviour.lock() {
            Behaviour::BadConfig(message) => Err(message.to_owned()),
            _ => Ok(()),
        }
    }

    fn spawn(&self, handoff: Handoff) -> Result<Box<dyn Successor>, String> {
        let n = self.record.spawns.fetch_add(1, Ordering::SeqCst);
        self.record
            .handoffs
            .lock()
            .push((handoff.listeners.listener_count(), handoff.instances.len()));
        self.record.offline.lock().push(handoff.offline.len());
        Ok(Box::new(FakeSuccessor {
            pid: 1000 + n as u32,
            behaviour: self.behaviour.lock().clone(),
            record: self.record.clone(),
        }))
    }
}

struct FakeSuccessor {
    pid: u32,
    behaviour: Behaviour,
    record: Arc<Record>,
}

#[async_trait]
impl Successor for FakeSuccessor {
    fn pid(&self) -> u32 {
        self.pid
    }

    async fn ready(&mut self) -> Result<(), String> {
        match self.behaviour {
            Behaviour::Exits(tail) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(format!("exited before ready (exit code 1): {tail}"))
            }
            Behaviour::ReadyAfter(after) => {
                tokio::time::sleep(after).await;
                Ok(())
            }
            Behaviour::Hangs | Behaviour::BadConfig(_) => std::future::pending().await,
        }
    }

    async fn abandon(self: Box<Self>) -> String {
        self.record.abandoned.fetch_add(1, Ordering::SeqCst);
        "last words".to_owned()
    }

    fn taken_over(self: Box<Self>) -> Box<dyn Any + Send> {
        self.record.taken_over.fetch_add(1, Ordering::SeqCst);
        Box::new(())
    }
}

/// Counts what the lifecycle asks of a registry; refuses registrations while `refuse`
/// is set (an unreachable registry).
#[derive(Default)]
struct CountingRegistry {
    registers: AtomicUsize,
    unregisters: AtomicUsize,
    releases: AtomicUsize,
    refuse: std::sync::atomic::AtomicBool,
    refused: AtomicUsize,
}

#[async_trait]
impl Registry for CountingRegistry {
    fn url(&self) -> &str {
        "counting://"
    }
    async fn register(&self, _: &Instance) -> Result<(), RegistryError> {
        if self.refuse.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(RegistryError::Unreachable {
                url: self.url().into(),
                timeout: Duration::from_secs(3),
                cause: rpc_core::Unreachability::Refused,
                source: "connection refused".into(),
            });
        }
        self.registers.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn unregister(&self, _: &Instance) -> Result<(), RegistryError> {
        self.unregisters.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn release(&self, _: &Instance) -> Result<(), RegistryError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn subscribe(&self, _: &ServiceKey) -> Result<Subscription, RegistryError> {
        Err(RegistryError::Closed {
            url: self.url().into(),
        })
    }
    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        Err(RegistryError::UnknownSubscription(id))
    }
    async fn close(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}

struct Fixture {
    lifecycle: Lifecycle,
    spawner: Arc<FakeSpawner>,
    record: Arc<Record>,
    registry: Arc<CountingRegistry>,
}

impl Fixture {
    fn set(&self, behaviour: Behaviour) {
        *self.spawner.behaviour.lock() = behaviour;
    }
}

/// A serving lifecycle with one listener and one registration, upgrades configured
/// with `behaviour` and a 2 s ready timeout.
async fn serving(behaviour: Behaviour) -> Fixture {
    let config = ShutdownConfig {
        internal_signal: false,
        offline_request_window_timeout: Duration::from_millis(100),
        ..ShutdownConfig::default()
    };
    let lifecycle = Lifecycle::new("upgrade-test", config);
    let registry = Arc::new(CountingRegistry::default());
    let service = tower::util::BoxCloneSyncService::new(tower::service_fn(
        |_req: http::Request<hyper::body::Incoming>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        },
    ));
    let plan = StartPlan {
        exports: vec![Export {
            listener: None,
            bind: "127.0.0.1:0".parse().unwrap(),
            advertise_host: None,
            options: Default::default(),
            service,
            services: vec![ExportedService::new(ServiceKey::new("t.S"))],
        }],
        registries: vec![registry.clone()],
        ..StartPlan::default()
    };
    lifecycle.start(plan).await.unwrap();
    let record = Arc::new(Record::default());
    let spawner = Arc::new(FakeSpawner {
        behaviour: Mutex::new(behaviour),
        record: record.clone(),
    });
    let config = UpgradeConfig {
        ready_timeout: Duration::from_secs(2),
        ..UpgradeConfig::default()
    };
    lifecycle.configure_upgrade(config, spawner.clone(), None);
    Fixture {
        lifecycle,
        spawner,
        record,
        registry,
    }
}

fn outcome(report: &UpgradeReport, step: UpgradeStep) -> Option<StepOutcome> {
    report.step(step).map(|s| s.outcome)
}

#[tokio::test(start_paused = true)]
async fn ten_triggers_within_100_ms_start_exactly_one_new_process() {
    let f = serving(Behaviour::ReadyAfter(Duration::from_millis(500))).await;
    let mut triggers = Vec::new();
    for _ in 0..10 {
        triggers.push(tokio::spawn(f.lifecycle.upgrade()));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut results = Vec::new();
    for trigger in triggers {
        results.push(trigger.await.unwrap());
    }
    assert_eq!(f.record.checks.load(Ordering::SeqCst), 1);
    assert_eq!(f.record.spawns.load(Ordering::SeqCst), 1);
    let succeeded = results.iter().filter(|r| r.succeeded()).count();
    assert_eq!(succeeded, 1);
    for refused in results.iter().filter(|r| !r.succeeded()) {
        assert_eq!(refused.result, UpgradeResult::Refused);
        assert_eq!(refused.refusal, Some(Refusal::InProgress), "{refused}");
    }
    assert_eq!(f.lifecycle.upgrade_counts().refused, 9);
}

#[tokio::test(start_paused = true)]
async fn a_hand_over_releases_registrations_drains_and_ends_like_a_clean_shutdown() {
    let f = serving(Behaviour::ReadyAfter(Duration::from_millis(300))).await;
    let report = f.lifecycle.upgrade().await;
    assert!(report.succeeded(), "{report}");
    assert_eq!(report.new_pid, Some(1000));
    assert_eq!(report.time_to_ready, Some(Duration::from_millis(300)));
    assert_eq!(
        *f.record.handoffs.lock(),
        [(1, 1)],
        "the listener and the instance"
    );
    let steps: Vec<_> = report.steps.iter().map(|s| s.step).collect();
    assert_eq!(
        steps,
        [
            UpgradeStep::Trigger,
            UpgradeStep::Check,
            UpgradeStep::Spawn,
            UpgradeStep::WaitReady,
            UpgradeStep::HandOver
        ],
        "the trigger hears of the outcome at the hand-over"
    );

    let drained: ShutdownReport = f.lifecycle.wait().await;
    assert_eq!(drained.handed_over_to, Some(1000));
    assert_eq!(drained.exit_code(), 0);
    assert_eq!(f.lifecycle.phase(), Phase::Stopped);
    assert_eq!(f.registry.unregisters.load(Ordering::SeqCst), 0);
    assert_eq!(f.registry.releases.load(Ordering::SeqCst), 1);
    assert_eq!(f.record.taken_over.load(Ordering::SeqCst), 1);
    let last = f.lifecycle.last_upgrade().unwrap();
    assert_eq!(last.steps.len(), 7, "{last}");
    assert!(
        last.steps
            .iter()
            .all(|s| s.outcome == StepOutcome::Completed)
    );
    // The phases a consumer could see: never closing while connections are served.
    let phases: Vec<Phase> = f
        .lifecycle
        .phase_history()
        .iter()
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(
        phases,
        [
            Phase::Created,
            Phase::Starting,
            Phase::Serving,
            Phase::HandedOver,
            Phase::Callbacks,
            Phase::Stopped
        ]
    );
    // A shutdown signal now belongs to the new process: this one only finishes.
    assert_eq!(
        f.lifecycle.before_shutdown().await.handed_over_to,
        Some(1000)
    );
    assert_eq!(
        f.lifecycle.upgrade().await.refusal,
        Some(Refusal::HandedOver)
    );
}

#[tokio::test(start_paused = true)]
async fn a_bad_configuration_aborts_before_anything_is_started() {
    let f = serving(Behaviour::BadConfig("key `protocol.port`: invalid")).await;
    let report = f.lifecycle.upgrade().await;
    assert_eq!(report.result, UpgradeResult::Failed);
    assert_eq!(
        outcome(&report, UpgradeStep::Check),
        Some(StepOutcome::Failed)
    );
    assert!(
        report.reason.as_deref().unwrap().contains("protocol.port"),
        "{report}"
    );
    assert_eq!(f.record.spawns.load(Ordering::SeqCst), 0);
    assert_eq!(f.lifecycle.phase(), Phase::Serving);
}

#[tokio::test(start_paused = true)]
async fn a_new_process_that_exits_is_reaped_and_the_next_upgrade_succeeds() {
    let f = serving(Behaviour::Exits("panicked at main.rs")).await;
    let report = f.lifecycle.upgrade().await;
    assert_eq!(report.result, UpgradeResult::Failed);
    assert_eq!(
        outcome(&report, UpgradeStep::WaitReady),
        Some(StepOutcome::Failed)
    );
    let reason = report.reason.as_deref().unwrap();
    assert!(reason.contains("panicked at main.rs"), "{reason}");
    assert!(reason.contains("last words"), "{reason}");
    assert_eq!(f.record.abandoned.load(Ordering::SeqCst), 1);
    assert_eq!(f.lifecycle.phase(), Phase::Serving);
    assert_eq!(
        f.registry.registers.load(Ordering::SeqCst),
        2,
        "registered again, in case the new process took the instance"
    );

    f.set(Behaviour::ReadyAfter(Duration::from_millis(100)));
    let report = f.lifecycle.upgrade().await;
    assert!(report.succeeded(), "{report}");
    let counts = f.lifecycle.upgrade_counts();
    assert_eq!((counts.failed, counts.succeeded), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_new_process_never_ready_is_killed_at_the_ready_timeout() {
    let f = serving(Behaviour::Hangs).await;
    let report = f.lifecycle.upgrade().await;
    let wait = report.step(UpgradeStep::WaitReady).unwrap();
    assert_eq!(wait.outcome, StepOutcome::TimedOut);
    assert_eq!(wait.duration, Duration::from_secs(2));
    assert!(
        report
            .reason
            .as_deref()
            .unwrap()
            .contains("not ready within"),
        "{report}"
    );
    assert_eq!(f.record.abandoned.load(Ordering::SeqCst), 1);
    assert_eq!(f.lifecycle.phase(), Phase::Serving);
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_during_the_start_kills_the_new_process_and_shuts_down_as_usual() {
    let f = serving(Behaviour::Hangs).await;
    let upgrade = tokio::spawn(f.lifecycle.upgrade());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shutdown: ShutdownReport = f.lifecycle.before_shutdown().await;
    let report = upgrade.await.unwrap();
    assert_eq!(report.result, UpgradeResult::Cancelled);
    assert_eq!(
        outcome(&report, UpgradeStep::WaitReady),
        Some(StepOutcome::Skipped)
    );
    assert_eq!(f.lifecycle.upgrade_counts().cancelled, 1);
    assert_eq!(f.lifecycle.upgrade_counts().failed, 0);
    assert_eq!(f.record.abandoned.load(Ordering::SeqCst), 1);
    assert_eq!(shutdown.handed_over_to, None);
    assert_eq!(f.registry.unregisters.load(Ordering::SeqCst), 1);
    assert_eq!(
        f.lifecycle.upgrade().await.refusal,
        Some(Refusal::ShuttingDown)
    );
}

#[tokio::test(start_paused = true)]
async fn refused_while_the_previous_generation_drains_and_before_configuration() {
    let f = serving(Behaviour::ReadyAfter(Duration::ZERO)).await;
    let (gone, predecessor_exits) = tokio::sync::oneshot::channel::<()>();
    f.lifecycle.predecessor_alive(async move {
        let _ = predecessor_exits.await;
    });
    assert_eq!(
        f.lifecycle.upgrade().await.refusal,
        Some(Refusal::PredecessorDraining)
    );
    drop(gone);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(f.lifecycle.upgrade().await.succeeded());

    let unconfigured = Lifecycle::new("plain", ShutdownConfig::default());
    assert_eq!(
        unconfigured.upgrade().await.refusal,
        Some(Refusal::NotConfigured)
    );
}

/// Remembers the refusals of signals it is told.
#[derive(Default)]
struct RefusalsHeard(Mutex<Vec<Refusal>>);

impl UpgradeListener for RefusalsHeard {
    fn signal_refused(&self, refusal: Refusal) {
        self.0.lock().push(refusal);
    }
}

#[tokio::test(start_paused = true)]
async fn turned_off_every_trigger_is_refused_and_a_signal_s_refusal_is_told() {
    let f = serving(Behaviour::ReadyAfter(Duration::ZERO)).await;
    let heard = Arc::new(RefusalsHeard::default());
    let off = UpgradeConfig {
        enabled: false,
        ..UpgradeConfig::default()
    };
    f.lifecycle
        .configure_upgrade(off, f.spawner.clone(), Some(heard.clone()));
    assert!(!f.lifecycle.upgrade_by_signal_enabled());

    let called = f.lifecycle.upgrade().await;
    assert_eq!(called.result, UpgradeResult::Refused);
    assert_eq!(called.refusal, Some(Refusal::Disabled));
    assert!(
        called
            .reason
            .as_deref()
            .unwrap()
            .contains("upgrade.enabled: false"),
        "{called}"
    );
    assert!(
        heard.0.lock().is_empty(),
        "a caller hears its refusal itself"
    );

    let signalled = f.lifecycle.upgrade_by_signal().await;
    assert_eq!(signalled.refusal, Some(Refusal::Disabled));
    assert_eq!(*heard.0.lock(), [Refusal::Disabled]);
    assert_eq!(f.record.checks.load(Ordering::SeqCst), 0, "nothing ran");
    assert_eq!(f.lifecycle.upgrade_counts().refused, 2);
    assert_eq!(f.lifecycle.phase(), Phase::Serving);

    // On without SIGUSR2 (`upgrade.signal: false`): start-up installs no handler for it.
    let no_signal = UpgradeConfig {
        signal: false,
        ..UpgradeConfig::default()
    };
    f.lifecycle
        .configure_upgrade(no_signal, f.spawner.clone(), None);
    assert!(!f.lifecycle.upgrade_by_signal_enabled());
    assert!(
        f.lifecycle.upgrade_signal_ignored(),
        "a SIGUSR2 read for internal_signal starts nothing"
    );

    // Turned on again, the same lifecycle upgrades.
    f.lifecycle
        .configure_upgrade(UpgradeConfig::default(), f.spawner.clone(), None);
    assert!(f.lifecycle.upgrade_by_signal_enabled());
    assert!(f.lifecycle.upgrade().await.succeeded());
}

/// Issue 36: "is this instance online" has one owner at a time. A manual offline or
/// online asked while an upgrade runs (at every step before and after the hand-over) is
/// refused naming the upgrade and changes nothing; a service manually offline before
/// the upgrade is handed over as offline, not re-registered by the new process.
#[tokio::test(start_paused = true)]
async fn offline_during_an_upgrade_is_refused_and_offline_before_it_is_handed_over() {
    let f = serving(Behaviour::ReadyAfter(Duration::from_millis(300))).await;
    let upgrade = tokio::spawn(f.lifecycle.upgrade());
    // Through check (10 ms), spawn, and wait-ready (300 ms): refused each time.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let refused = f.lifecycle.offline(|_| true).await.unwrap_err();
        assert!(
            matches!(refused, TrafficError::Upgrading(Refusal::InProgress)),
            "{refused}"
        );
        assert!(f.lifecycle.offline_services().is_empty(), "nothing changed");
    }
    assert!(upgrade.await.unwrap().succeeded());
    // Handed over: the registrations are the new process's.
    let refused = f.lifecycle.online(|_| true).await.unwrap_err();
    assert!(
        matches!(refused, TrafficError::Upgrading(Refusal::HandedOver)),
        "{refused}"
    );
    assert_eq!(f.registry.unregisters.load(Ordering::SeqCst), 0);
    assert_eq!(
        f.registry.registers.load(Ordering::SeqCst),
        1,
        "start-up's only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_service_offline_before_an_upgrade_is_handed_over_offline() {
    let f = serving(Behaviour::ReadyAfter(Duration::from_millis(100))).await;
    f.lifecycle.offline(|_| true).await.unwrap();
    let report = f.lifecycle.upgrade().await;
    assert!(report.succeeded(), "{report}");
    assert_eq!(
        *f.record.offline.lock(),
        [1],
        "the withdrawn instance goes to the new process as offline"
    );
    assert_eq!(
        *f.record.handoffs.lock(),
        [(1, 0)],
        "and not among those it registers"
    );
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_does_not_begin_while_a_manual_change_moves_registrations() {
    let f = serving(Behaviour::ReadyAfter(Duration::from_millis(100))).await;
    let change = f.lifecycle.inner.registrations.try_one_change().unwrap();
    let refused = f.lifecycle.upgrade().await;
    assert_eq!(refused.refusal, Some(Refusal::TrafficChanging), "{refused}");
    drop(change);
    assert!(f.lifecycle.upgrade().await.succeeded());
}

/// The registration's pending state, as observers see it.
fn pending(f: &Fixture) -> Option<crate::Pending> {
    let registrations = f.lifecycle.registrations_by_registry();
    assert_eq!(registrations.len(), 1);
    registrations[0].pending.clone()
}

/// Issue 36: a registry unreachable when a failed upgrade registers again leaves the
/// registration pending, retried with backoff (visible meanwhile), and it holds again
/// within the longest delay once the registry answers.
#[tokio::test(start_paused = true)]
async fn a_registration_that_fails_after_a_failed_upgrade_is_retried_until_it_holds() {
    let f = serving(Behaviour::Exits("panicked at main.rs")).await;
    f.registry.refuse.store(true, Ordering::SeqCst);
    let report = f.lifecycle.upgrade().await;
    assert_eq!(report.result, UpgradeResult::Failed);
    assert!(
        matches!(pending(&f), Some(crate::Pending::Retrying { attempts: 1, ref last_error, .. }) if last_error.contains("refused")),
        "{:?}",
        pending(&f)
    );

    // Down for a minute: retried all along, ever more slowly (100 ms doubling to 5 s).
    tokio::time::sleep(Duration::from_secs(60)).await;
    let tried = f.registry.refused.load(Ordering::SeqCst);
    assert!((14..=30).contains(&tried), "{tried} attempts in a minute");
    let Some(crate::Pending::Retrying {
        attempts, since, ..
    }) = pending(&f)
    else {
        panic!("still pending: {:?}", pending(&f));
    };
    assert_eq!(attempts as usize, tried);
    assert!(since.elapsed() >= Duration::from_secs(60));
    assert_eq!(f.registry.registers.load(Ordering::SeqCst), 1, "start-up's");

    // The registry answers again: the registration holds within the longest delay.
    let back = tokio::time::Instant::now();
    f.registry.refuse.store(false, Ordering::SeqCst);
    while pending(&f).is_some() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        back.elapsed() <= crate::backoff::LONGEST_DELAY,
        "held {:?} after the registry came back",
        back.elapsed()
    );
    assert_eq!(f.registry.registers.load(Ordering::SeqCst), 2);
    // Nothing more is tried once it holds.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(f.registry.registers.load(Ordering::SeqCst), 2);
    assert_eq!(f.registry.refused.load(Ordering::SeqCst), tried);
    assert_eq!(f.lifecycle.phase(), Phase::Serving);
}

/// Issue 36: the retries end with the shutdown: its step 1 takes the pending
/// registration and withdraws it, and nothing registers it again afterwards.
#[tokio::test(start_paused = true)]
async fn a_shutdown_ends_the_retries_and_nothing_registers_behind_it() {
    let f = serving(Behaviour::Exits("panicked at main.rs")).await;
    f.registry.refuse.store(true, Ordering::SeqCst);
    assert_eq!(f.lifecycle.upgrade().await.result, UpgradeResult::Failed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(pending(&f).is_some());

    let _: ShutdownReport = f.lifecycle.before_shutdown().await;
    assert_eq!(f.registry.unregisters.load(Ordering::SeqCst), 1);
    let tried = f.registry.refused.load(Ordering::SeqCst);
    f.registry.refuse.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(f.registry.refused.load(Ordering::SeqCst), tried);
    assert_eq!(
        f.registry.registers.load(Ordering::SeqCst),
        1,
        "nothing registered after the shutdown's withdrawal"
    );
    assert!(f.lifecycle.registrations_by_registry().is_empty());
}

/// A hand-over takes pending registrations too: the next upgrade's old process stops
/// retrying (the new one registered the instances), and releases them.
#[tokio::test(start_paused = true)]
async fn a_hand_over_ends_the_retries() {
    let f = serving(Behaviour::Exits("panicked at main.rs")).await;
    f.registry.refuse.store(true, Ordering::SeqCst);
    assert_eq!(f.lifecycle.upgrade().await.result, UpgradeResult::Failed);
    assert!(pending(&f).is_some());

    f.set(Behaviour::ReadyAfter(Duration::from_millis(100)));
    assert!(f.lifecycle.upgrade().await.succeeded());
    let tried = f.registry.refused.load(Ordering::SeqCst);
    f.registry.refuse.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(f.registry.refused.load(Ordering::SeqCst), tried);
    assert_eq!(
        f.registry.registers.load(Ordering::SeqCst),
        1,
        "start-up's only"
    );
    assert_eq!(f.registry.releases.load(Ordering::SeqCst), 1);
}
