//! A manual offline while the registry cannot be written, then the online (the fleet
//! simulator found it, seed 2134): the offline's closing mark moves the consumer away at
//! once, but its withdrawal fails, so the registry never shows the offline. The online
//! writes the registration with a higher `online-revision`; that change reaches the
//! consumer and lifts the mark — before, the registry showed nothing new and the consumer
//! kept the provider out until `closing_invoker_expire_time` (here 10 minutes, so that
//! only the lifted mark can bring the traffic back within the test's bound).

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::switched_registry::{SwitchedRegistry, Switches};
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::lifecycle::ONLINE_REVISION;
use rpc::registry::MemoryHub;
use rpc::{Application, ReferenceChannel};
use rpc_testkit::services::GreeterProvider;
use tokio::time::Instant;

/// Bound on the wait for the provider to answer again after its online.
const BACK_WITHIN: Duration = Duration::from_secs(20);

async fn answered_by(client: &mut GreeterClient<ReferenceChannel>) -> String {
    let hello = HelloRequest {
        name: "online".to_owned(),
        count: 0,
    };
    client
        .say_hello(hello)
        .await
        .expect("no call fails")
        .into_inner()
        .provider
}

#[tokio::test]
async fn an_online_after_an_offline_the_registry_never_showed_brings_traffic_back() {
    common::logs();
    let hub = MemoryHub::new();
    let switches = Switches::default();
    let unwritable = switches.unwritable.clone();
    let mut builder = Application::builder(common::config("provider-a"));
    builder.registry(
        "default",
        Arc::new(SwitchedRegistry {
            inner: hub.client(),
            switches,
        }),
    );
    builder.service(GreeterServer::new(GreeterProvider));
    let a = builder.start().await.expect("provider A starts");
    let a_addr = a.local_addr().expect("serving").to_string();
    let b = common::greeter_provider(&hub).await;
    let mut config = common::config("consumer");
    config.consumer.directory.closing_invoker_expire_time = Duration::from_secs(600);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.expect("consumer starts");
    let mut reached_a = false;
    for _ in 0..20 {
        reached_a |= answered_by(&mut client).await == a_addr;
    }
    assert!(reached_a, "both providers in use first");

    unwritable.store(true, Ordering::SeqCst);
    let changes = a.lifecycle().offline(|_| true).await.expect("offline");
    assert!(changes[0].registries.is_empty(), "{changes:?}");
    assert_eq!(changes[0].failed.len(), 1, "the withdrawal failed");
    let mut after_offline = 0;
    for _ in 0..50 {
        after_offline += usize::from(answered_by(&mut client).await == a_addr);
    }
    assert!(
        after_offline <= 1,
        "the closing mark moved the consumer: {after_offline}"
    );

    unwritable.store(false, Ordering::SeqCst);
    a.lifecycle().online(|_| true).await.expect("online");
    let listed = a.lifecycle().registrations();
    assert_eq!(
        listed[0].metadata.get(ONLINE_REVISION).map(String::as_str),
        Some("1")
    );
    let deadline = Instant::now() + BACK_WITHIN;
    let mut back = false;
    while !back && Instant::now() < deadline {
        back = answered_by(&mut client).await == a_addr;
    }
    assert!(
        back,
        "A answered no call within {BACK_WITHIN:?} of its online"
    );

    consumer.before_shutdown().await;
    for provider in [&a, &b] {
        assert_eq!(provider.before_shutdown().await.exit_code(), 0);
    }
}
