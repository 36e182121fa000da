//! Cluster strategies against real providers whose behaviour the test scripts: what is
//! retried (and what never is), the retry budget, the per-call override, and that a
//! closing provider's refusals never reach the caller, whatever the strategy.

mod common;

use std::time::Duration;

use common::{Behavior, Scripted};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::cluster::{ClusterKind, LoadBalanceKind, ReferenceConfig};
use rpc::registry::MemoryHub;
use rpc::{Application, Config, ReferenceChannel};
use tonic::Code;

fn echo() -> EchoRequest {
    EchoRequest {
        payload: bytes::Bytes::from_static(b"payload"),
        delay_ms: None,
    }
}

async fn providers(hub: &MemoryHub, behaviors: &[Behavior]) -> (Vec<Scripted>, Vec<Application>) {
    let mut scripts = Vec::new();
    let mut apps = Vec::new();
    for (n, behavior) in behaviors.iter().enumerate() {
        let scripted = Scripted::new(*behavior);
        apps.push(
            common::scripted_provider(hub, &scripted, common::config(&format!("provider-{n}")))
                .await,
        );
        scripts.push(scripted);
    }
    (scripts, apps)
}

async fn consumer(
    hub: &MemoryHub,
    reference: ReferenceConfig,
    delay: Duration,
) -> (Application, EchoClient<ReferenceChannel>) {
    let mut config: Config = common::config("consumer");
    config
        .consumer
        .references
        .insert("echo.Echo".to_owned(), reference);
    let mut builder = common::builder_with(config, hub, delay);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    (builder.start().await.expect("consumer starts"), client)
}

fn total(scripts: &[Scripted]) -> usize {
    scripts.iter().map(Scripted::calls).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_attempts_at_most_one_plus_retries_each_on_a_new_instance() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Fail(Code::Unavailable); 3]).await;
    for (retries, attempts) in [(0u32, 1usize), (1, 2), (2, 3)] {
        let mut reference = ReferenceConfig::default();
        reference.retries = retries;
        reference.idempotent = true;
        let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
        let before: Vec<usize> = scripts.iter().map(Scripted::calls).collect();
        let status = client.echo(echo()).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        let now: Vec<usize> = scripts.iter().map(Scripted::calls).collect();
        let per_provider: Vec<usize> = now.iter().zip(&before).map(|(n, b)| n - b).collect();
        assert_eq!(
            per_provider.iter().sum::<usize>(),
            attempts,
            "retries: {retries}"
        );
        assert!(
            per_provider.iter().all(|&n| n <= 1),
            "never the same instance twice: {per_provider:?}"
        );
        app.before_shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_non_idempotent_call_runs_exactly_once() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Sleep(Duration::from_millis(800)); 3]).await;
    let mut reference = ReferenceConfig::default();
    reference.timeout = Some(Duration::from_millis(100));
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    let status = client.echo(echo()).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    // Every attempt of a call is sent before the call returns, so what the consumer
    // dispatched now is all it will ever send for this call: one attempt, no retry.
    let list = app.references()[0].directory().list();
    let dispatched: u64 = list
        .invokers()
        .iter()
        .map(|invoker| invoker.stats().dispatched)
        .sum();
    assert_eq!(dispatched, 1, "sent exactly once");
    assert_eq!(app.references()[0].stats().retries, 0);
    // And that one attempt ran (the provider's handler sleeps past the deadline).
    tokio::time::timeout(Duration::from_secs(10), async {
        while total(&scripts) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the attempt reaches a provider");
    assert_eq!(total(&scripts), 1, "executed exactly once");
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_timeout_is_retried_and_the_call_header_can_forbid_it() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Sleep(Duration::from_millis(800)); 3]).await;
    let mut reference = ReferenceConfig::default();
    reference.timeout = Some(Duration::from_millis(100));
    reference
        .methods
        .entry("Echo".to_owned())
        .or_default()
        .idempotent = Some(true);
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    assert_eq!(
        client.echo(echo()).await.unwrap_err().code(),
        Code::DeadlineExceeded
    );
    assert_eq!(total(&scripts), 3, "1 + 2 retries");

    let mut request = tonic::Request::new(echo());
    request
        .metadata_mut()
        .insert("rpc-retries", "0".parse().unwrap());
    assert_eq!(
        client.echo(request).await.unwrap_err().code(),
        Code::DeadlineExceeded
    );
    assert_eq!(
        total(&scripts),
        4,
        "the per-call header beat the configured 2 retries"
    );
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_retried_even_for_a_non_idempotent_method() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Ok]).await;
    // A registered instance whose port nobody listens on (a crashed provider).
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ghost = hub.client();
    let dead = rpc::Instance::new(rpc::ServiceKey::new("echo.Echo"), "127.0.0.1", dead_port);
    rpc::core::Registry::register(&ghost, &dead).await.unwrap();
    let mut reference = ReferenceConfig::default();
    reference.loadbalance = LoadBalanceKind::RoundRobin;
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    for _ in 0..20 {
        client
            .echo(echo())
            .await
            .expect("not executed, so retried elsewhere");
    }
    assert_eq!(total(&scripts), 20);
    // The dead instance was picked (its requests never left, so they were sent again —
    // as a transparent re-send or a failover retry) and every call still succeeded.
    let list = app.references()[0].directory().list();
    let dead_attempts: u64 = list
        .invokers()
        .iter()
        .filter(|invoker| invoker.instance().port == dead_port)
        .map(|invoker| invoker.stats().dispatched)
        .sum();
    assert!(
        dead_attempts >= 1,
        "the dead instance was tried and passed over"
    );
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_bounds_retries_when_everything_fails() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Fail(Code::Unavailable); 3]).await;
    let mut reference = ReferenceConfig::default();
    reference.idempotent = true;
    reference.backoff_base = Duration::ZERO;
    reference.backoff_max = Duration::ZERO;
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    let calls = 600;
    for _ in 0..calls {
        assert_eq!(
            client.echo(echo()).await.unwrap_err().code(),
            Code::Unavailable
        );
    }
    let stats = app.references()[0].stats();
    println!(
        "{calls} failing calls: {} executions, {stats:?}",
        total(&scripts)
    );
    // Without a budget: 3 × 600 = 1 800 executions. tower's budget allows 10/s
    // for its 10 s window plus 20 % of the calls.
    assert!(stats.budget_exhausted > 0);
    assert!(
        total(&scripts) <= calls + 100 + calls / 5 + 10,
        "{}",
        total(&scripts)
    );
    app.before_shutdown().await;
}

/// Provider A is shutting down and stays in the drain (a long call holds it), so it
/// refuses new requests as "closing, not executed"; the consumer still lists it (its
/// registry is slow). Under every strategy the caller sees only successes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_refusals_are_rerouted_under_every_strategy() {
    common::logs();
    let hub = MemoryHub::new();
    let closing = Scripted::new(Behavior::Sleep(Duration::from_secs(3)));
    let mut config = common::config("closing");
    config.graceful_shutdown.consumer_update_wait_time = Duration::from_millis(200);
    config.graceful_shutdown.offline_request_window_timeout = Duration::from_millis(100);
    config.graceful_shutdown.step_timeout = Duration::from_secs(10);
    let closing_app = common::scripted_provider(&hub, &closing, config).await;
    let healthy = Scripted::new(Behavior::Ok);
    let healthy_app = common::scripted_provider(&hub, &healthy, common::config("healthy")).await;

    // Every consumer subscribes now, while both are registered, and hears of changes
    // only after 60 s.
    let strategies = [
        ClusterKind::Failover,
        ClusterKind::Failfast,
        ClusterKind::Failsafe,
        ClusterKind::Failback,
        ClusterKind::Forking,
        ClusterKind::Broadcast,
        ClusterKind::Available,
    ];
    let mut consumers = Vec::new();
    for cluster in strategies {
        // Round-robin: the second call at the latest goes to the closing provider, so
        // every strategy that balances meets its refusal.
        let mut reference = ReferenceConfig::default();
        reference.cluster = cluster;
        reference.loadbalance = LoadBalanceKind::RoundRobin;
        consumers.push((
            cluster,
            consumer(&hub, reference, Duration::from_secs(60)).await,
        ));
    }
    // One long call holds the closing provider in its drain.
    let closing_addr = closing_app.local_addr().unwrap();
    let mut direct = EchoClient::connect(format!("http://{closing_addr}"))
        .await
        .unwrap();
    let holder = tokio::spawn(async move { direct.echo(echo()).await });
    while closing.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    closing.set(Behavior::Ok);
    let mut phase = closing_app.watch_phase();
    let shutdown = tokio::spawn(closing_app.before_shutdown());
    wait_until_unregistered(&hub).await;
    // Past its consumer wait: it now refuses new requests (held in the drain).
    phase
        .wait_for(|phase| *phase >= rpc::Phase::DrainingInbound)
        .await
        .unwrap();

    for (cluster, (app, client)) in &consumers {
        for _ in 0..20 {
            let reply = client
                .clone()
                .echo(echo())
                .await
                .unwrap_or_else(|status| panic!("{cluster:?}: {status:?}"));
            let reply = reply.into_inner();
            assert_eq!(
                reply.payload.as_ref(),
                b"payload",
                "{cluster:?} answered by a real provider"
            );
        }
        let stats = app.references()[0].stats();
        println!("{cluster:?}: {stats:?}");
        assert_eq!(
            stats.swallowed, 0,
            "{cluster:?}: nothing failed, so nothing was swallowed"
        );
        // Available calls the first instance in the directory's order (by id) and
        // meets the closing one only if it comes first; every other strategy meets it
        // (round-robin, forks, broadcast) and re-routes its refusal.
        let closing_first = app.references()[0].directory().list().invokers()[0].authority()
            == closing_addr.to_string();
        if *cluster == ClusterKind::Available && !closing_first {
            assert_eq!(stats.reroutes, 0, "{cluster:?} never reached it: {stats:?}");
        } else {
            assert!(
                stats.reroutes >= 1,
                "{cluster:?}: the refusal was re-routed: {stats:?}"
            );
        }
    }
    assert_eq!(
        closing.calls(),
        1,
        "the closing provider executed nothing new"
    );
    assert!(holder.await.unwrap().is_ok(), "the long call finished");
    let report = shutdown.await.unwrap();
    assert!(report.rejected >= 4, "{report}");
    for (_, (app, _)) in consumers {
        app.before_shutdown().await;
    }
    healthy_app.before_shutdown().await;
}

/// Waits until the hub lists only one provider: the closing one has unregistered.
async fn wait_until_unregistered(hub: &MemoryHub) {
    for _ in 0..2_000 {
        if hub.instances(&rpc::ServiceKey::new("echo.Echo")).len() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the closing provider did not unregister");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failsafe_returns_an_empty_reply_instead_of_the_failure() {
    let hub = MemoryHub::new();
    let (_scripts, _apps) = providers(&hub, &[Behavior::Fail(Code::Unavailable)]).await;
    let mut reference = ReferenceConfig::default();
    reference.cluster = ClusterKind::Failsafe;
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    let reply = client
        .echo(echo())
        .await
        .expect("failsafe swallows")
        .into_inner();
    assert!(
        reply.payload.is_empty() && reply.provider.is_empty(),
        "an empty message: {reply:?}"
    );
    assert_eq!(app.references()[0].stats().swallowed, 1);
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_answers_at_once_and_retries_in_the_background() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Fail(Code::Unavailable)]).await;
    // A short period: the test waits for the retry, not for Dubbo's 5 s. Long enough
    // that the provider is fixed before the first background retry.
    let mut reference = ReferenceConfig::default();
    reference.cluster = ClusterKind::Failback;
    reference.failback.retry_period = Duration::from_millis(200);
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    let reply = client
        .echo(echo())
        .await
        .expect("failback answers at once")
        .into_inner();
    assert!(reply.payload.is_empty());
    assert_eq!(app.references()[0].failback_queued(), 1);
    scripts[0].set(Behavior::Ok);
    // Retried after the failback period.
    let retried = tokio::time::timeout(Duration::from_secs(10), async {
        while scripts[0].calls() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    retried.await.expect("a background retry within 10 s");
    assert_eq!(
        scripts[0].calls(),
        2,
        "the background retry reached the provider"
    );
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forking_takes_the_first_success() {
    let hub = MemoryHub::new();
    let (scripts, apps) = providers(
        &hub,
        &[Behavior::Sleep(Duration::from_secs(2)), Behavior::Ok],
    )
    .await;
    let mut reference = ReferenceConfig::default();
    reference.cluster = ClusterKind::Forking;
    reference.forks = 2;
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    // Start-up waits for a provider, not for both: fork only once both are known.
    let directory = app.references()[0].directory().clone();
    tokio::time::timeout(Duration::from_secs(5), async {
        while directory.list().invokers().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the consumer learns of both providers");
    let reply = client.echo(echo()).await.unwrap().into_inner();
    assert_eq!(
        reply.provider,
        apps[1].local_addr().unwrap().to_string(),
        "the fast one answered"
    );
    assert_eq!(scripts[1].calls(), 1);
    // Both forks were sent, each once, although the fast one answered first (the slow
    // one may be cancelled before its handler runs, so its script may count 0 or 1).
    let list = app.references()[0].directory().list();
    let dispatched: Vec<u64> = list
        .invokers()
        .iter()
        .map(|invoker| invoker.stats().dispatched)
        .collect();
    assert_eq!(dispatched, [1, 1], "each fork dispatched once");
    assert!(scripts[0].calls() <= 1, "the slow fork ran at most once");
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_reaches_every_instance_and_fails_if_any_fails() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Ok, Behavior::Ok, Behavior::Ok]).await;
    let mut reference = ReferenceConfig::default();
    reference.cluster = ClusterKind::Broadcast;
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    client.echo(echo()).await.unwrap();
    assert!(scripts.iter().all(|s| s.calls() == 1));
    scripts[2].set(Behavior::Fail(Code::Internal));
    assert_eq!(
        client.echo(echo()).await.unwrap_err().code(),
        Code::Internal
    );
    assert!(scripts.iter().all(|s| s.calls() == 2));
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn available_always_calls_the_first_selectable_instance() {
    let hub = MemoryHub::new();
    let (scripts, _apps) = providers(&hub, &[Behavior::Ok, Behavior::Ok, Behavior::Ok]).await;
    let mut reference = ReferenceConfig::default();
    reference.cluster = ClusterKind::Available;
    let (app, mut client) = consumer(&hub, reference, Duration::ZERO).await;
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..10 {
        answered.insert(client.echo(echo()).await.unwrap().into_inner().provider);
    }
    assert_eq!(answered.len(), 1);
    assert_eq!(total(&scripts), 10);
    app.before_shutdown().await;
}
