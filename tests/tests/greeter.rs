//! The request path end to end: generated client → reference → registry → HTTP/2 →
//! generated server; and the clear errors of bad input.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::cluster::ClusterError;
use rpc::lifecycle::StartError;
use rpc::registry::MemoryHub;
use rpc::transport::TransportError;
use rpc::{Application, ApplicationError};
use rpc_testkit::services::GreeterProvider;

fn hello(name: &str) -> HelloRequest {
    HelloRequest {
        name: name.to_owned(),
        count: 0,
    }
}

#[tokio::test]
async fn calls_reach_both_providers_through_the_registry() {
    let hub = MemoryHub::new();
    let providers = [
        common::greeter_provider(&hub).await,
        common::greeter_provider(&hub).await,
    ];
    let addresses: BTreeSet<String> = providers
        .iter()
        .map(|p| p.local_addr().unwrap().to_string())
        .collect();

    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.unwrap();

    let mut answered = BTreeSet::new();
    for n in 0..40 {
        let reply = client
            .say_hello(hello(&format!("n{n}")))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reply.message, format!("Hello, n{n}!"));
        answered.insert(reply.provider);
    }
    assert_eq!(answered, addresses, "both providers answered");

    let mut stream = client
        .say_hello_stream(HelloRequest {
            name: "s".into(),
            count: 3,
        })
        .await
        .unwrap()
        .into_inner();
    let mut replies = Vec::new();
    while let Some(reply) = stream.message().await.unwrap() {
        replies.push(reply.message);
    }
    assert_eq!(replies, ["Hello #1, s!", "Hello #2, s!", "Hello #3, s!"]);

    // An application error is the provider's answer, not a failure to retry.
    let status = client.say_hello(hello("")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(consumer.references()[0].stats().retries, 0);

    consumer.before_shutdown().await;
    for provider in &providers {
        assert_eq!(provider.before_shutdown().await.exit_code(), 0);
    }
}

#[tokio::test]
async fn a_call_with_no_provider_is_a_typed_unavailable() {
    let hub = MemoryHub::new();
    let mut config = common::config("consumer");
    config.consumer.check = false;
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.unwrap();

    let status = client.say_hello(hello("x")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(
        status
            .message()
            .contains("no provider available for helloworld.Greeter"),
        "{status:?}"
    );
    let source = std::error::Error::source(&status).and_then(|e| e.downcast_ref::<ClusterError>());
    assert!(
        matches!(source, Some(ClusterError::NoProvider { .. })),
        "{status:?}"
    );
    consumer.before_shutdown().await;
}

/// The only instance listed is gone (its port refuses): the attempt on it fails, the
/// retry finds no other instance, and the caller gets "no provider" as documented —
/// not the attempt's connection error — with that error told in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_only_provider_is_gone_past_the_wait_is_no_provider() {
    let hub = MemoryHub::new();
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ghost = hub.client();
    let service = rpc::ServiceKey::new("helloworld.Greeter");
    let dead = rpc::Instance::new(service, "127.0.0.1", dead_port);
    rpc::core::Registry::register(&ghost, &dead).await.unwrap();
    let mut config = common::config("consumer");
    let reference = config
        .consumer
        .references
        .entry("helloworld.Greeter".to_owned())
        .or_default();
    reference.wait_for_provider = Duration::from_millis(100);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.unwrap();

    let status = client.say_hello(hello("x")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    let source = std::error::Error::source(&status).and_then(|e| e.downcast_ref::<ClusterError>());
    assert!(
        matches!(source, Some(ClusterError::NoProvider { .. })),
        "{status:?}"
    );
    assert!(
        status
            .message()
            .starts_with("no provider available for helloworld.Greeter; the last attempt failed: "),
        "{status:?}"
    );
    let stats = consumer.references()[0].stats();
    assert_eq!((stats.retries, stats.no_provider), (1, 1), "{stats:?}");
    consumer.before_shutdown().await;
}

#[tokio::test]
async fn check_true_fails_start_up_naming_the_service() {
    let hub = MemoryHub::new();
    let mut config = common::config("consumer");
    config.consumer.check_timeout = Duration::from_millis(100);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let _client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let error = builder
        .start()
        .await
        .err()
        .expect("no provider: start-up fails");
    assert!(
        matches!(
            error,
            ApplicationError::Start(StartError::NoProvider { .. })
        ),
        "{error}"
    );
    assert!(error.to_string().contains("helloworld.Greeter"), "{error}");
}

#[tokio::test]
async fn a_malformed_registry_url_is_named() {
    let mut config = common::config("app");
    config.registries.get_mut("default").unwrap().url = "etcd://127.0.0.1:notaport".to_owned();
    let error = Application::builder(config)
        .start()
        .await
        .err()
        .expect("bad URL");
    let message = error.to_string();
    assert!(matches!(error, ApplicationError::Config(_)), "{message}");
    assert_eq!(error.exit_code(), 2, "a configuration error");
    assert!(
        message.contains("configuration built in code: key `registries.default.url`")
            && message.contains("bad port `notaport`"),
        "{message}"
    );
}

#[tokio::test]
async fn a_bad_registry_url_parameter_names_the_file_and_the_key() {
    let file = "registries:\n  main: { url: \"etcd://127.0.0.1:2379?ttl=soon\" }\n";
    let mut config = rpc::Config::from_str(file, rpc::ConfigFormat::Yaml, "provider.yaml")
        .expect("the URL parses; its parameters are read by the backend");
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    config.application.logging = false;
    let error = Application::builder(config)
        .start()
        .await
        .err()
        .expect("bad parameter");
    let message = error.to_string();
    assert!(
        message.starts_with("provider.yaml: key `registries.main.url`: ")
            && message.contains("ttl"),
        "{message}"
    );

    // The same URL from the environment is named by its variable.
    let vars = [(
        "RPC_REGISTRIES__MAIN__URL".to_owned(),
        "etcd://127.0.0.1:2379?ttl=soon".to_owned(),
    )];
    let mut config =
        rpc::Config::from_str_with_env("", rpc::ConfigFormat::Yaml, "provider.yaml", vars)
            .expect("the URL parses");
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    config.application.logging = false;
    let error = Application::builder(config)
        .start()
        .await
        .err()
        .expect("bad parameter");
    let message = error.to_string();
    assert!(
        message.starts_with(
            "environment variable RPC_REGISTRIES__MAIN__URL: key `registries.main.url`: "
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_port_in_use_is_a_bind_error_and_nothing_is_registered() {
    let hub = MemoryHub::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = common::config("provider");
    config.protocol.port = taken.local_addr().unwrap().port();
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    let error = builder.start().await.err().expect("port in use");
    let port = config_port(&error);
    assert_eq!(port, taken.local_addr().unwrap().port());
    // The message names the key and where to set it, as the admin port's does.
    let message = error.to_string();
    assert!(
        message.contains(&format!("protocol.port {port}: cannot listen on"))
            && message.contains("RPC_PROTOCOL__PORT"),
        "{message}"
    );
    assert!(
        hub.instances(&rpc::ServiceKey::new("helloworld.Greeter"))
            .is_empty()
    );
}

/// The port of a listener that could not be bound, from the error's own parts: a bind
/// error of the operating system's `AddrInUse`.
fn config_port(error: &ApplicationError) -> u16 {
    match error {
        ApplicationError::Listen { port, source, .. } => match source.as_ref() {
            StartError::Transport(TransportError::Bind { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
                *port
            }
            other => panic!("expected a bind error, got {other}"),
        },
        other => panic!("expected a listen error, got {other}"),
    }
}
