//! `access_log`: one JSON line per call on each side, with the fields
//! docs/observability.md names ("Access logs"), a call its deadline cut short included;
//! a path that cannot be opened fails start-up naming `access_log.path`.

mod common;

use std::path::Path;
use std::time::Duration;

use prost::Message;
use proto::echo::EchoRequest;
use proto::echo::echo_server::EchoServer;
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{ApplicationError, Config};
use rpc_testkit::services::{EchoProvider, GreeterProvider};
use rpc_testkit::wire::grpc::{self, framed};

fn logged(name: &str, path: &Path) -> Config {
    let mut config = common::config(name);
    config.access_log.enabled = true;
    config.access_log.path = path.to_owned();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_side_writes_one_json_line_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let (served, made) = (dir.path().join("served.log"), dir.path().join("made.log"));
    let hub = MemoryHub::new();
    let mut provider = common::builder_with(logged("provider", &served), &hub, Duration::ZERO);
    provider.service(GreeterServer::new(GreeterProvider));
    let provider = provider.start().await.expect("the provider starts");
    let mut consumer = common::builder_with(logged("consumer", &made), &hub, Duration::ZERO);
    let mut client = GreeterClient::new(consumer.reference("helloworld.Greeter"));
    let consumer = consumer.start().await.expect("the consumer starts");

    let hello = |name: &str| HelloRequest {
        name: name.to_owned(),
        count: 1,
    };
    client.say_hello(hello("log")).await.expect("a call");
    let refused = client.say_hello(hello("")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    let server_lines = common::json_lines(&served, 2).await;
    let client_lines = common::json_lines(&made, 2).await;
    for (lines, side, application) in [
        (&server_lines, "server", "provider"),
        (&client_lines, "client", "consumer"),
    ] {
        let codes: Vec<i64> = lines
            .iter()
            .map(|line| line["rpc.grpc.status_code"].as_i64().unwrap())
            .collect();
        assert_eq!(codes, [0, 3], "{lines:?}");
        for line in lines {
            assert_eq!(line["side"], side);
            assert_eq!(line["application"], application);
            assert_eq!(line["rpc.system"], "grpc");
            assert_eq!(line["rpc.service"], "helloworld.Greeter");
            assert_eq!(line["rpc.method"], "SayHello");
            assert!(line["duration_ms"].as_f64().unwrap() >= 0.0, "{line}");
            assert!(line["timestamp"].as_str().unwrap().ends_with('Z'), "{line}");
        }
    }
    // The provider knows its caller; the consumer's line has no peer.
    assert_eq!(server_lines[0]["network.peer.address"], "127.0.0.1");
    assert!(server_lines[0]["network.peer.port"].as_u64().unwrap() > 0);
    assert!(client_lines[0].get("network.peer.address").is_none());
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}

#[tokio::test]
async fn a_path_that_cannot_be_opened_fails_start_up_naming_the_key() {
    let hub = MemoryHub::new();
    let config = logged("provider", Path::new("/nonexistent-dir/access.log"));
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    let Err(error) = builder.start().await else {
        panic!("start-up must fail");
    };
    assert!(matches!(error, ApplicationError::Config(_)), "{error}");
    assert!(error.to_string().contains("access_log.path"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_at_its_deadline_is_logged_as_deadline_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served.log");
    let hub = MemoryHub::new();
    let mut provider = common::builder_with(logged("provider", &served), &hub, Duration::ZERO);
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.expect("the provider starts");
    let addr = provider.local_addr().unwrap();

    // Written by hand (h2): a gRPC library would give up at its own deadline first.
    let request = EchoRequest {
        payload: bytes::Bytes::from_static(b"late"),
        delay_ms: Some(5_000),
    };
    let headers = [
        ("content-type", "application/grpc"),
        ("grpc-timeout", "100m"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
    ];
    let body = framed(false, &request.encode_to_vec(), None);
    let code = tokio::time::timeout(
        Duration::from_secs(10),
        grpc::call(addr, "/echo.Echo/Echo", &headers, body),
    )
    .await
    .expect("an answer within the bound")
    .expect("a gRPC answer");
    assert_eq!(code, tonic::Code::DeadlineExceeded);

    let lines = common::json_lines(&served, 1).await;
    assert_eq!(lines[0]["rpc.grpc.status_code"], 4, "{lines:?}");
    assert_eq!(lines[0]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    provider.before_shutdown().await;
}
