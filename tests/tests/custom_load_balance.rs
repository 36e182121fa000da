//! A load balance of the application's own, plugged in through the public API and named
//! in the configuration file, as the built-in ones are; a name nobody registered fails
//! start-up naming the key and the file.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Behavior, Scripted};
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rand::rngs::SmallRng;
use rpc::cluster::loadbalance::{Candidates, LoadBalance, RequestInfo};
use rpc::registry::MemoryHub;
use rpc::{ApplicationError, Config, ConfigFormat};

/// Always the selectable instance with the highest port: a rule no built-in load
/// balance follows, so every call landing there shows that this one picked.
#[derive(Debug)]
struct HighestPort;

impl LoadBalance for HighestPort {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        _request: &RequestInfo<'_>,
        _rng: &mut SmallRng,
    ) -> Option<usize> {
        candidates
            .selectable()
            .max_by_key(|&index| candidates.get(index).instance().port)
    }
}

fn consumer_config(loadbalance: &str) -> Config {
    let text = format!(
        "application: {{ name: consumer, logging: false }}\n\
         admin: {{ port: 0 }}\n\
         graceful_shutdown: {{ internal_signal: false }}\n\
         consumer:\n  references:\n    echo.Echo: {{ loadbalance: {loadbalance} }}\n"
    );
    Config::from_str(&text, ConfigFormat::Yaml, "consumer.yaml").expect("valid configuration")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_load_balance_named_in_the_file_picks_every_call() {
    let hub = MemoryHub::new();
    let mut scripts = Vec::new();
    let mut providers = Vec::new();
    for n in 0..3 {
        let scripted = Scripted::new(Behavior::Ok);
        let app =
            common::scripted_provider(&hub, &scripted, common::config(&format!("p{n}"))).await;
        let port = app.local_addr().expect("a provider listens").port();
        scripts.push((port, scripted));
        providers.push(app);
    }

    let mut builder = common::builder_with(consumer_config("highest_port"), &hub, Duration::ZERO);
    builder.load_balance("highest_port", || Arc::new(HighestPort));
    let mut client = EchoClient::new(builder.reference("echo.Echo"));
    let consumer = builder.start().await.expect("consumer starts");
    for _ in 0..30 {
        let request = EchoRequest {
            payload: bytes::Bytes::from_static(b"x"),
            delay_ms: None,
        };
        client.echo(request).await.expect("call succeeds");
    }

    let highest = scripts.iter().map(|(port, _)| *port).max().unwrap();
    for (port, scripted) in &scripts {
        let expected = if *port == highest { 30 } else { 0 };
        assert_eq!(scripted.calls(), expected, "provider on port {port}");
    }
    consumer.before_shutdown().await;
    for provider in providers {
        provider.before_shutdown().await;
    }
}

#[tokio::test]
async fn a_name_nobody_registered_fails_start_up_naming_the_key_and_the_file() {
    let hub = MemoryHub::new();
    let mut builder = common::builder_with(consumer_config("fastest"), &hub, Duration::ZERO);
    let _client = EchoClient::new(builder.reference("echo.Echo"));
    let Err(error) = builder.start().await else {
        panic!("start-up must fail");
    };
    assert!(matches!(error, ApplicationError::Config(_)), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("consumer.yaml")
            && message.contains("consumer.references.echo.Echo.loadbalance")
            && message.contains("`fastest`")
            && message.contains("p2c"),
        "{message}"
    );
}
