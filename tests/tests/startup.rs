//! Graceful online: listeners serve before readiness gates run, gates pass before
//! registration, `delay` registers late, a failed start leaves nothing behind, and
//! `check: true` waits for a provider that comes up a little later.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::lifecycle::StartError;
use rpc::registry::MemoryHub;
use rpc::{ApplicationError, Phase, ServiceKey};
use rpc_testkit::services::EchoProvider;

fn echo_key() -> ServiceKey {
    ServiceKey::new("echo.Echo")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_gates_run_after_listening_and_before_registering() {
    let hub = MemoryHub::new();
    let mut builder = common::builder("provider", &hub, Duration::ZERO);
    builder.service(EchoServer::new(EchoProvider::default()));
    let lifecycle = builder.lifecycle().clone();
    let gate_ran = Arc::new(AtomicBool::new(false));
    let (ran, gate_hub) = (gate_ran.clone(), hub.clone());
    builder.readiness_gate(move || async move {
        let server = lifecycle
            .servers()
            .first()
            .cloned()
            .expect("already listening");
        tokio::net::TcpStream::connect(server.local_addr()).await?;
        assert!(
            gate_hub.instances(&echo_key()).is_empty(),
            "not registered before the gate passes"
        );
        ran.store(true, Ordering::SeqCst);
        Ok(())
    });
    let app = builder.start().await.unwrap();
    assert!(gate_ran.load(Ordering::SeqCst));
    assert_eq!(hub.instances(&echo_key()).len(), 1);
    assert_eq!(app.phase(), Phase::Serving);
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_gate_undoes_the_start() {
    let hub = MemoryHub::new();
    let mut builder = common::builder("provider", &hub, Duration::ZERO);
    builder.service(EchoServer::new(EchoProvider::default()));
    let lifecycle = builder.lifecycle().clone();
    builder.readiness_gate(|| async { Err("cache warm-up failed".into()) });
    let error = builder
        .start()
        .await
        .err()
        .expect("the gate fails start-up");
    assert!(
        matches!(
            error,
            ApplicationError::Start(StartError::Gate { index: 0, .. })
        ),
        "{error}"
    );
    assert!(error.to_string().contains("cache warm-up failed"));
    assert!(hub.instances(&echo_key()).is_empty(), "nothing registered");
    assert!(lifecycle.servers().is_empty(), "listeners closed");
    assert_eq!(lifecycle.phase(), Phase::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_registers_after_the_service_is_ready() {
    let hub = MemoryHub::new();
    let mut config = common::config("provider");
    config
        .provider
        .services
        .entry("echo.Echo".to_owned())
        .or_default()
        .delay = Duration::from_secs(1);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    builder.service(EchoServer::new(EchoProvider::default()));
    let lifecycle = builder.lifecycle().clone();
    let start = tokio::spawn(builder.start());
    // Wait until it serves; it must still be unregistered (the delay is 1 s).
    let addr = loop {
        if let Some(server) = lifecycle.servers().first() {
            break server.local_addr();
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let mut direct = EchoClient::connect(format!("http://{addr}")).await.unwrap();
    direct
        .echo(proto::echo::EchoRequest::default())
        .await
        .expect("serving during the delay");
    assert!(
        hub.instances(&echo_key()).is_empty(),
        "registered only after the delay"
    );
    let app = start.await.unwrap().unwrap();
    assert_eq!(hub.instances(&echo_key()).len(), 1);
    app.before_shutdown().await;
}

/// Paused time for the wait itself: the consumer's start is watched up to just before
/// its `check_timeout`, on tokio's clock, so "it is still waiting" is shown for the whole
/// bound without sleeping through it. The provider serves already (on another hub, so
/// nobody knows of it); its instance is then announced in memory, and the clock resumes
/// only for the call over the network.
#[tokio::test]
async fn check_waits_for_a_provider_that_arrives_in_time() {
    let hub = MemoryHub::new();
    let elsewhere = MemoryHub::new();
    let provider = common::echo_provider(&elsewhere, 0, common::config("provider")).await;
    let config = common::config("consumer");
    let check_timeout = config.consumer.check_timeout;
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let mut client = EchoClient::new(builder.reference("echo.Echo"));

    tokio::time::pause();
    let consumer = tokio::spawn(builder.start());
    tokio::time::sleep(check_timeout - Duration::from_millis(1)).await;
    assert!(
        !consumer.is_finished(),
        "start-up still waits {check_timeout:?} - 1 ms in, with no provider known"
    );
    let addr = provider.local_addr().unwrap();
    let instance = rpc::Instance::new(echo_key(), addr.ip().to_string(), addr.port());
    // Kept alive to the end: the hub's presence is ephemeral, like every registry's.
    let announcer = hub.client();
    rpc::core::Registry::register(&announcer, &instance)
        .await
        .unwrap();
    let consumer = consumer
        .await
        .unwrap()
        .expect("the provider arrived within check_timeout");
    tokio::time::resume();
    client
        .echo(proto::echo::EchoRequest::default())
        .await
        .unwrap();
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}
