//! Manual offline and online with tokio's paused clock: what each withdraws and
//! restores, the probes, the offline set the provider filter reads, refusals, and how
//! a change under way and the shutdown sequence keep out of each other's way.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::test_registry::TestRegistry;
use super::*;
use rpc_core::ServiceKey;

fn config() -> ShutdownConfig {
    ShutdownConfig {
        internal_signal: false,
        ..ShutdownConfig::default()
    }
}

const GREETER: &str = "helloworld.Greeter";
const ECHO: &str = "echo.Echo";

/// A lifecycle serving `helloworld.Greeter` and `echo.Echo` on a free loopback port,
/// registered in `registry`.
async fn serving(registry: Arc<TestRegistry>) -> Lifecycle {
    let lifecycle = Lifecycle::new("test", config());
    let service = tower::util::BoxCloneSyncService::new(tower::service_fn(
        |_req: http::Request<hyper::body::Incoming>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        },
    ));
    let plan = StartPlan {
        exports: vec![Export {
            bind: "127.0.0.1:0".parse().unwrap(),
            listener: None,
            advertise_host: None,
            options: Default::default(),
            service,
            services: vec![
                ExportedService::new(ServiceKey::new(GREETER)),
                ExportedService::new(ServiceKey::new(ECHO)),
            ],
        }],
        registries: vec![registry],
        ..StartPlan::default()
    };
    lifecycle.start(plan).await.unwrap();
    lifecycle
}

fn services(changes: &[TrafficChange]) -> Vec<String> {
    changes.iter().map(|c| c.service.to_string()).collect()
}

fn online_flags(lifecycle: &Lifecycle) -> Vec<(String, bool)> {
    lifecycle
        .registrations_by_registry()
        .into_iter()
        .map(|r| (r.instance.service.to_string(), r.online))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn offline_withdraws_every_registration_without_stopping_and_online_restores_them() {
    let registry = Arc::new(TestRegistry::default());
    let lifecycle = serving(registry.clone()).await;
    let filter = lifecycle.provider_handles();
    assert!(lifecycle.probe(Probe::Ready).passed);

    let changes = lifecycle.offline(|_| true).await.unwrap();
    assert_eq!(services(&changes), [GREETER, ECHO]);
    assert_eq!(changes[0].registries, ["recording://"]);
    assert!(changes[0].failed.is_empty());
    assert_eq!(lifecycle.phase(), Phase::Serving, "offline does not stop");
    assert!(lifecycle.registrations().is_empty());
    assert_eq!(
        online_flags(&lifecycle),
        [(ECHO.to_owned(), false), (GREETER.to_owned(), false)]
    );
    assert!(
        filter.offline.all(),
        "every response carries the closing mark"
    );
    let ready = lifecycle.probe(Probe::Ready);
    assert!(!ready.passed);
    assert_eq!(
        ready.reason,
        "not ready: manually offline: echo.Echo, helloworld.Greeter"
    );
    assert!(lifecycle.probe(Probe::Startup).passed);
    assert!(lifecycle.probe(Probe::Live).passed);

    // Asked again: nothing more to change.
    assert!(lifecycle.offline(|_| true).await.unwrap().is_empty());

    let changes = lifecycle.online(|_| true).await.unwrap();
    assert_eq!(services(&changes), [GREETER, ECHO]);
    assert!(!filter.offline.any());
    assert_eq!(lifecycle.registrations().len(), 2);
    // Written anew, so that a consumer that read the closing mark sees a change even
    // where the registry never showed the offline.
    let revisions = |lifecycle: &Lifecycle| -> Vec<Option<String>> {
        lifecycle
            .registrations()
            .iter()
            .map(|instance| instance.metadata.get(ONLINE_REVISION).cloned())
            .collect()
    };
    assert_eq!(
        revisions(&lifecycle),
        [Some("1".to_owned()), Some("1".to_owned())]
    );
    assert!(lifecycle.probe(Probe::Ready).passed);
    assert!(lifecycle.online(|_| true).await.unwrap().is_empty());
    let mut events = registry.events();
    events.sort();
    assert_eq!(
        events,
        [
            "register echo.Echo",
            "register echo.Echo",
            "register helloworld.Greeter",
            "register helloworld.Greeter",
            "unregister echo.Echo",
            "unregister helloworld.Greeter"
        ]
    );
    lifecycle.offline(|_| true).await.unwrap();
    lifecycle.online(|_| true).await.unwrap();
    assert_eq!(
        revisions(&lifecycle),
        [Some("2".to_owned()), Some("2".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_selection_takes_out_only_its_services() {
    let registry = Arc::new(TestRegistry::default());
    let lifecycle = serving(registry.clone()).await;
    let filter = lifecycle.provider_handles();
    let changes = lifecycle
        .offline(|key| &*key.interface == GREETER)
        .await
        .unwrap();
    assert_eq!(services(&changes), [GREETER]);
    assert_eq!(
        online_flags(&lifecycle),
        [(ECHO.to_owned(), true), (GREETER.to_owned(), false)]
    );
    assert!(filter.offline.covers("/helloworld.Greeter/SayHello"));
    assert!(!filter.offline.covers("/echo.Echo/Echo"));
    assert!(!filter.offline.all());
    assert!(!lifecycle.probe(Probe::Ready).passed);

    // Online of the other service changes nothing: it was not offline.
    let changes = lifecycle
        .online(|key| &*key.interface == ECHO)
        .await
        .unwrap();
    assert!(changes.is_empty());
    assert!(filter.offline.any());
}

#[tokio::test(start_paused = true)]
async fn a_selection_of_nothing_is_refused_naming_what_is_provided() {
    let lifecycle = serving(Arc::default()).await;
    let error = lifecycle.offline(|_| false).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "no provided service matches (provided: helloworld.Greeter, echo.Echo)"
    );
    assert!(matches!(
        lifecycle.online(|_| false).await,
        Err(TrafficError::NoMatch { .. })
    ));
    assert!(lifecycle.probe(Probe::Ready).passed, "nothing changed");
}

#[tokio::test(start_paused = true)]
async fn before_start_up_and_during_shutdown_changes_are_refused() {
    let lifecycle = Lifecycle::new("test", config());
    assert_eq!(
        lifecycle.offline(|_| true).await,
        Err(TrafficError::Starting(Phase::Created))
    );
    assert_eq!(
        lifecycle.probe(Probe::Startup).reason,
        "not started: start-up has not begun"
    );

    let registry = Arc::new(TestRegistry::default());
    let lifecycle = serving(registry.clone()).await;
    lifecycle.offline(|_| true).await.unwrap();
    let shutdown = tokio::spawn(lifecycle.before_shutdown());
    let mut phases = lifecycle.watch_phase();
    phases
        .wait_for(|phase| *phase >= Phase::WaitingForConsumers)
        .await
        .unwrap();
    let refused = lifecycle.online(|_| true).await.unwrap_err();
    assert!(matches!(refused, TrafficError::ShuttingDown(_)));
    assert!(refused.to_string().contains("shutting down"), "{refused}");
    let ready = lifecycle.probe(Probe::Ready);
    assert!(
        ready.reason.starts_with("not ready: shutting down"),
        "{ready}"
    );
    let report = shutdown.await.unwrap();
    assert_eq!(report.unregister_failures, 0);
    // Withdrawn once, by the offline: the shutdown had nothing left to withdraw.
    let unregistered = registry
        .events()
        .iter()
        .filter(|e| e.starts_with("unregister"))
        .count();
    assert_eq!(unregistered, 2);
}

/// A registry that does not answer at the moment of an online does not undo it: the
/// service is back at once, and its registrations are retried until they hold (the
/// fleet simulator found the old behaviour — the service left offline until someone
/// asked again — when the registry lost its leader during an online).
#[tokio::test(start_paused = true)]
async fn a_failed_registration_at_an_online_is_retried_until_it_holds() {
    let registry = Arc::new(TestRegistry::default());
    let lifecycle = serving(registry.clone()).await;
    let filter = lifecycle.provider_handles();
    lifecycle.offline(|_| true).await.unwrap();
    registry.refuse_register.store(true, Ordering::SeqCst);
    let changes = lifecycle.online(|_| true).await.unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].failed[0].0, "recording://");
    assert!(changes[0].registries.is_empty());
    assert!(
        lifecycle.offline_services().is_empty(),
        "online all the same"
    );
    assert!(!filter.offline.any(), "no closing mark");
    let pending = |lifecycle: &Lifecycle| {
        lifecycle
            .registrations_by_registry()
            .iter()
            .filter(|registration| registration.pending.is_some())
            .count()
    };
    assert_eq!(pending(&lifecycle), 2);

    // Taken offline and brought back while the registry answers: nothing is left
    // pending from the failed online.
    registry.refuse_register.store(false, Ordering::SeqCst);
    lifecycle.offline(|_| true).await.unwrap();
    lifecycle.online(|_| true).await.unwrap();
    assert_eq!(pending(&lifecycle), 0);
    lifecycle.offline(|_| true).await.unwrap();
    registry.refuse_register.store(true, Ordering::SeqCst);
    lifecycle.online(|_| true).await.unwrap();
    assert_eq!(pending(&lifecycle), 2);

    // The registry answers again: the next attempts hold (backoff: 100 ms doubling).
    tokio::time::sleep(Duration::from_secs(1)).await;
    registry.refuse_register.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(pending(&lifecycle), 0);
    assert_eq!(lifecycle.registrations().len(), 2);
    assert!(lifecycle.online(|_| true).await.unwrap().is_empty());
}

/// An offline whose withdrawal the registry refused (no leader) holds all the same, and
/// the withdrawal is retried until the registry takes it — unless an online comes
/// first, which settles it.
#[tokio::test(start_paused = true)]
async fn a_failed_withdrawal_at_an_offline_is_retried_until_it_holds() {
    let registry = Arc::new(TestRegistry::default());
    let lifecycle = serving(registry.clone()).await;
    let withdrawing = |lifecycle: &Lifecycle| {
        lifecycle
            .registrations_by_registry()
            .iter()
            .filter(|r| matches!(r.pending, Some(crate::Pending::Withdrawing { .. })))
            .count()
    };
    let withdrawals = |registry: &TestRegistry| {
        let events = registry.events();
        events
            .iter()
            .filter(|e| e.starts_with("unregister"))
            .count()
    };
    registry.refuse_unregister.store(true, Ordering::SeqCst);
    let changes = lifecycle.offline(|_| true).await.unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].failed[0].0, "recording://");
    assert_eq!(
        lifecycle.offline_services().len(),
        2,
        "offline all the same"
    );
    assert_eq!(withdrawing(&lifecycle), 2);

    // The registry takes writes again: the next attempts hold (backoff: 100 ms doubling).
    tokio::time::sleep(Duration::from_secs(1)).await;
    registry.refuse_unregister.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(withdrawing(&lifecycle), 0);
    assert_eq!(withdrawals(&registry), 2, "each withdrawn once it could be");

    // Refused again, then an online before the registry answers: nothing is withdrawn
    // behind the online's back.
    lifecycle.online(|_| true).await.unwrap();
    registry.refuse_unregister.store(true, Ordering::SeqCst);
    lifecycle.offline(|_| true).await.unwrap();
    assert_eq!(withdrawing(&lifecycle), 2);
    lifecycle.online(|_| true).await.unwrap();
    assert_eq!(withdrawing(&lifecycle), 0);
    registry.refuse_unregister.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        withdrawals(&registry),
        2,
        "the online settled the withdrawal"
    );
    assert_eq!(lifecycle.registrations().len(), 2);
}

/// An offline under way when shutdown begins finishes first; the shutdown then
/// withdraws only what is left, and a change asked for afterwards is refused.
#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_a_change_under_way_and_refuses_later_ones() {
    let gate = Arc::new(Semaphore::new(0));
    let registry = Arc::new(TestRegistry::holding_withdrawals(gate.clone()));
    let lifecycle = serving(registry.clone()).await;
    let offline = {
        let lifecycle = lifecycle.clone();
        tokio::spawn(async move { lifecycle.offline(|key| &*key.interface == GREETER).await })
    };
    // The offline holds its withdrawal; the shutdown's step 1 waits for it.
    while !lifecycle.offline_services().iter().any(|s| &**s == GREETER) {
        tokio::task::yield_now().await;
    }
    let shutdown = tokio::spawn(lifecycle.before_shutdown());
    let mut phases = lifecycle.watch_phase();
    phases
        .wait_for(|phase| *phase == Phase::Unregistering)
        .await
        .unwrap();
    assert_eq!(
        lifecycle.registrations().len(),
        1,
        "step 1 has not taken them yet"
    );
    gate.add_permits(2);
    let changes = offline.await.unwrap().unwrap();
    assert_eq!(services(&changes), [GREETER]);
    let report = shutdown.await.unwrap();
    assert_eq!(report.unregister_failures, 0);
    assert_eq!(
        registry.events(),
        [
            "register helloworld.Greeter",
            "register echo.Echo",
            "unregister helloworld.Greeter",
            "unregister echo.Echo"
        ]
    );
    assert!(matches!(
        lifecycle.offline(|_| true).await,
        Err(TrafficError::ShuttingDown(Phase::Stopped))
    ));
}
