//! Message compression from configuration (`provider.services.<name>.compression`,
//! `consumer.references.<name>.compression`) against peers that are not ours: a grpcio
//! client that compresses its requests (`tests/python/compression_client.py`), grpcio
//! servers that read them or refuse them (`tests/python/compression_server.py`), and a
//! raw HTTP/2 client that shows what a provider's responses were on the wire (grpcio
//! shows a caller neither the flag nor `grpc-encoding`). Also ours to ours with zstd,
//! streams included, a compressed request replayed by failover, and what a provider
//! does with a bomb, bytes that do not decompress and an encoding it does not read.
//!
//! The Python tests need `RPC_TEST_PYTHON` (a Python with grpcio and grpcio-tools;
//! `scripts/test.sh` sets it with `RPC_TEST_REQUIRE_PYTHON=1`); without it, and not
//! required, they say they were skipped.

mod common;

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use prost::Message as _;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use proto::echo::{EchoReply, EchoRequest};
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use proto::greeter::{HelloReply, HelloRequest};
use rpc::cluster::{LoadBalanceKind, ReferenceConfig};
use rpc::config::RegistryConfig;
use rpc::core::Compression;
use rpc::filter::compression::RequestEncoding;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationBuilder, Config, ProviderService, ReferenceChannel};
use rpc_testkit::external::Need;
use rpc_testkit::services::{EchoProvider, GreeterProvider};
use rpc_testkit::wire::grpc::{self, Exchange, framed};
use tokio::io::{AsyncBufReadExt, BufReader};
use tonic::Code;
use tower::ServiceExt as _;

/// Bound on a Python peer's start, and on each client's whole run.
const PEER_BOUND: Duration = Duration::from_secs(60);

/// Bound on one raw exchange.
const CALL_BOUND: Duration = Duration::from_secs(10);

const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";

/// One request that reached a provider's routes: its path and what it arrived as (the
/// compression filter's record, `None` when it was not compressed).
type Arrival = (String, Option<RequestEncoding>);

/// What reached a provider's routes, in order.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<Arrival>>>);

impl Arrivals {
    /// Adds a provider layer (behind the compression filter) that records every call.
    fn watch(builder: &mut ApplicationBuilder) -> Self {
        let arrivals = Self::default();
        let record = arrivals.clone();
        builder.provider_layer(tower::layer::layer_fn(move |inner: ProviderService| {
            let record = record.clone();
            tower::service_fn(move |request: http::Request<tonic::body::Body>| {
                assert!(
                    request.headers().get("grpc-encoding").is_none(),
                    "the routes never see grpc-encoding"
                );
                let arrived = request.extensions().get::<RequestEncoding>().cloned();
                record
                    .0
                    .lock()
                    .push((request.uri().path().to_owned(), arrived));
                inner.clone().oneshot(request)
            })
        }));
        arrivals
    }

    /// The encoding each call of `path` arrived in, and whether its first message was
    /// compressed (`("identity", false)` for a plain call).
    fn of(&self, path: &str) -> Vec<(&'static str, bool)> {
        self.0
            .lock()
            .iter()
            .filter(|(seen, _)| seen == path)
            .map(|(_, arrived)| match arrived {
                Some(arrived) => (
                    arrived.encoding().name(),
                    arrived.next_message_compressed() == Some(true),
                ),
                None => ("identity", false),
            })
            .collect()
    }
}

/// A provider of the greeter and the echo service on `hub`, their responses compressed
/// as `greeter` and `echo` say, its routes watched.
async fn provider(
    hub: &MemoryHub,
    greeter: Compression,
    echo: Compression,
) -> (Application, Arrivals) {
    let mut config = common::config("compressing-provider");
    for (service, compression) in [("helloworld.Greeter", greeter), ("echo.Echo", echo)] {
        config
            .provider
            .services
            .entry(service.to_owned())
            .or_default()
            .compression = compression;
    }
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.service(EchoServer::new(EchoProvider { work_ms: 0 }));
    let arrivals = Arrivals::watch(&mut builder);
    let app = builder.start().await.expect("the provider starts");
    (app, arrivals)
}

/// `config` with a reference to `service` compressing with `compression`.
fn referencing(mut config: Config, service: &str, reference: ReferenceConfig) -> Config {
    config
        .consumer
        .references
        .insert(service.to_owned(), reference);
    config
}

fn compressing(compression: Compression) -> ReferenceConfig {
    let mut reference = ReferenceConfig::default();
    reference.compression = compression;
    reference
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// One raw call of SayHello for `name` with `headers`, within [`CALL_BOUND`].
async fn raw_say_hello(app: &Application, headers: &[(&str, &str)], name: &str) -> Exchange {
    let request = HelloRequest {
        name: name.to_owned(),
        count: 0,
    };
    let body = framed(false, &request.encode_to_vec(), None);
    let addr = app.local_addr().unwrap();
    tokio::time::timeout(CALL_BOUND, grpc::exchange(addr, SAY_HELLO, headers, body))
        .await
        .expect("the exchange ends within its bound")
        .expect("the exchange completes")
}

/// A provider configured `gzip` (greeter) and `zstd` (echo) sends its responses so, as
/// they travel: the flag set on each message, `grpc-encoding` named; only to a client
/// whose `grpc-accept-encoding` lists it. Every response to such a client says what the
/// provider reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_service_answers_compressed_on_the_wire() {
    let hub = MemoryHub::new();
    let (app, _) = provider(&hub, Compression::Gzip, Compression::Zstd).await;
    let name = "raw ".repeat(50);

    let answer = raw_say_hello(&app, &[("grpc-accept-encoding", "identity,gzip")], &name).await;
    assert_eq!(answer.code(), Some(Code::Ok));
    assert_eq!(answer.headers["grpc-encoding"], "gzip");
    assert_eq!(answer.headers["grpc-accept-encoding"], "gzip,zstd,identity");
    let messages = answer.messages().unwrap();
    assert_eq!(messages.len(), 1);
    assert!(messages[0].0, "the reply is flagged compressed");
    let reply = HelloReply::decode(&gunzip(&messages[0].1)[..]).unwrap();
    assert_eq!(reply.message, format!("Hello, {name}!"));

    // A client that does not accept gzip gets it plain.
    let answer = raw_say_hello(&app, &[("grpc-accept-encoding", "identity")], &name).await;
    assert!(answer.headers.get("grpc-encoding").is_none());
    let messages = answer.messages().unwrap();
    assert!(!messages[0].0);
    let reply = HelloReply::decode(&messages[0].1[..]).unwrap();
    assert_eq!(reply.message, format!("Hello, {name}!"));

    // The echo service is configured zstd.
    let request = EchoRequest {
        payload: Bytes::from("zstd ".repeat(100)),
        delay_ms: None,
    };
    let body = framed(false, &request.encode_to_vec(), None);
    let addr = app.local_addr().unwrap();
    let answer = tokio::time::timeout(
        CALL_BOUND,
        grpc::exchange(
            addr,
            "/echo.Echo/Echo",
            &[("grpc-accept-encoding", "zstd")],
            body,
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answer.headers["grpc-encoding"], "zstd");
    let messages = answer.messages().unwrap();
    assert!(messages[0].0);
    let reply = EchoReply::decode(&zstd::decode_all(&messages[0].1[..]).unwrap()[..]).unwrap();
    assert_eq!(reply.payload, request.payload);
    app.before_shutdown().await;
}

/// What a provider does with compressed input it must not trust: a bomb ends the call
/// with RESOURCE_EXHAUSTED (the decoding limit, 4 MiB by default, bounds the
/// decompressed size), bytes that are not gzip with INTERNAL, an encoding it does not
/// read with UNIMPLEMENTED. The handler never runs for any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bomb_garbage_and_an_unknown_encoding_are_refused() {
    let hub = MemoryHub::new();
    let (app, arrivals) = provider(&hub, Compression::None, Compression::None).await;
    let addr = app.local_addr().unwrap();
    // 32 MiB of zeros in about 32 KiB: within the transport's limit on what travels,
    // eight times the limit on what it decompresses to.
    let bomb = gzip(&vec![0; 32 << 20]);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let cases = [
        ("gzip", framed(true, &bomb, None), Code::ResourceExhausted),
        (
            "gzip",
            framed(true, b"not gzip at all", None),
            Code::Internal,
        ),
        (
            "zstd",
            framed(true, b"not zstd either", None),
            Code::Internal,
        ),
        ("snappy", framed(true, b"?", None), Code::Unimplemented),
    ];
    for (encoding, body, want) in cases {
        let code = tokio::time::timeout(
            CALL_BOUND,
            grpc::call(addr, SAY_HELLO, &[("grpc-encoding", encoding)], body),
        )
        .await
        .expect("answered within the bound")
        .expect("answered with a gRPC status");
        assert_eq!(code, want, "{encoding}");
    }
    // The provider is still serving.
    let answer = raw_say_hello(&app, &[], "after").await;
    assert_eq!(answer.code(), Some(Code::Ok));
    app.before_shutdown().await;
    // The three that reached the routes (their bodies failed there); the unknown
    // encoding did not.
    assert_eq!(arrivals.of(SAY_HELLO).len(), 4);
}

/// Ours to ours, zstd both ways: the reference compresses every request (unary and
/// streamed), the provider decompresses them for the generated server and compresses
/// its answers, which the reference decompresses for the generated client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_reference_and_provider_speak_zstd_both_ways() {
    let hub = MemoryHub::new();
    let (app, arrivals) = provider(&hub, Compression::Zstd, Compression::Zstd).await;
    let config = referencing(
        common::config("zstd-consumer"),
        "helloworld.Greeter",
        compressing(Compression::Zstd),
    );
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let mut greeter = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.expect("the consumer starts");
    let name = "zstd ".repeat(100);
    let reply = greeter
        .say_hello(HelloRequest {
            name: name.clone(),
            count: 0,
        })
        .await
        .expect("a zstd call");
    assert_eq!(reply.into_inner().message, format!("Hello, {name}!"));
    let mut stream = greeter
        .say_hello_stream(HelloRequest {
            name: "z".into(),
            count: 3,
        })
        .await
        .expect("a zstd stream")
        .into_inner();
    let mut messages = Vec::new();
    while let Some(reply) = stream.message().await.expect("each reply decompresses") {
        messages.push(reply.message);
    }
    assert_eq!(messages, ["Hello #1, z!", "Hello #2, z!", "Hello #3, z!"]);
    assert_eq!(arrivals.of(SAY_HELLO), [("zstd", true)]);
    assert_eq!(
        arrivals.of("/helloworld.Greeter/SayHelloStream"),
        [("zstd", true)]
    );
    consumer.before_shutdown().await;
    app.before_shutdown().await;
}

/// The reference compresses once, in front of the cluster: when failover sends a call
/// again, to another instance, it replays the compressed bytes, and that instance reads
/// the request whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_replays_a_compressed_request() {
    let hub = MemoryHub::new();
    let failing = common::Scripted::new(common::Behavior::Fail(Code::Unavailable));
    let answering = common::Scripted::new(common::Behavior::Ok);
    let a = common::scripted_provider(&hub, &failing, common::config("failing")).await;
    let b = common::scripted_provider(&hub, &answering, common::config("answering")).await;
    let mut reference = compressing(Compression::Gzip);
    reference.idempotent = true;
    reference.loadbalance = LoadBalanceKind::RoundRobin;
    let config = referencing(common::config("gzip-consumer"), "echo.Echo", reference);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let client: EchoClient<ReferenceChannel> = EchoClient::new(builder.reference("echo.Echo"));
    let consumer = builder.start().await.expect("the consumer starts");
    for n in 0..4 {
        let payload = Bytes::from(format!("replayed {n} ").repeat(200));
        let reply = client
            .clone()
            .echo(EchoRequest {
                payload: payload.clone(),
                delay_ms: None,
            })
            .await
            .expect("answered by the instance that works");
        assert_eq!(reply.into_inner().payload, payload, "call {n}");
    }
    assert!(
        failing.calls() >= 1,
        "round robin sent some calls to the failing one first"
    );
    assert_eq!(answering.calls(), 4);
    consumer.before_shutdown().await;
    a.before_shutdown().await;
    b.before_shutdown().await;
}

/// A grpcio client compressing per call (`compression=grpc.Compression.Gzip`) reaches
/// the generated server, which was never told of gzip; deflate, which rpc does not read,
/// is refused with UNIMPLEMENTED. A reply the provider compresses (greeter configured
/// gzip) is read by grpcio, which accepts gzip by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpcio_client_that_compresses_is_understood() {
    let Some(python) = Need::Python.get("a_grpcio_client_that_compresses_is_understood") else {
        return;
    };
    let hub = MemoryHub::new();
    let (app, arrivals) = provider(&hub, Compression::Gzip, Compression::None).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/compression_client.py");
    let addr = app.local_addr().unwrap().to_string();
    let child = tokio::process::Command::new(python)
        .args([script, proto::PROTO_DIR, &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let output = tokio::time::timeout(PEER_BOUND, child.wait_with_output())
        .await
        .expect("the grpcio client finishes within its bound")
        .expect("the grpcio client runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the grpcio client failed");
    let name = "compressible ".repeat(40);
    let hello = format!("Hello, {}!", name.trim());
    assert!(
        stdout.contains(&format!("gzip unary: {hello}\n")),
        "{stdout}"
    );
    let streamed: Vec<String> = (1..=3)
        .map(|n| format!("Hello #{n}, {}!", name.trim()))
        .collect();
    assert!(
        stdout.contains(&format!("gzip stream: {}\n", streamed.join(" | "))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("plain unary: {hello}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("deflate unary: UNIMPLEMENTED grpc-encoding `deflate` is not supported"),
        "{stdout}"
    );
    // What grpcio sent, as the provider's compression filter saw it arrive: the gzip
    // call compressed, the plain one not, the deflate one never reached the routes.
    assert_eq!(
        arrivals.of(SAY_HELLO),
        [("gzip", true), ("identity", false)]
    );
    assert_eq!(
        arrivals.of("/helloworld.Greeter/SayHelloStream"),
        [("gzip", true)]
    );
    app.before_shutdown().await;
}

/// The two grpcio servers of `compression_server.py`, and the addresses they reported.
struct PythonServers {
    child: tokio::process::Child,
    accepting: String,
    identity_only: String,
}

impl PythonServers {
    async fn start(python: &str) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/compression_server.py");
        let mut child = tokio::process::Command::new(python)
            .args([script, proto::PROTO_DIR])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let read = async {
            let (mut accepting, mut identity_only) = (None, None);
            while accepting.is_none() || identity_only.is_none() {
                let line = lines.next_line().await.ok()??;
                if let Some(addr) = line.strip_prefix("accepting on ") {
                    accepting = Some(addr.trim().to_owned());
                } else if let Some(addr) = line.strip_prefix("identity-only on ") {
                    identity_only = Some(addr.trim().to_owned());
                }
            }
            Some((accepting?, identity_only?))
        };
        let (accepting, identity_only) = tokio::time::timeout(PEER_BOUND, read)
            .await
            .expect("the grpcio servers report their addresses within the bound")
            .expect("the grpcio servers start");
        Self {
            child,
            accepting,
            identity_only,
        }
    }

    async fn stop(mut self) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// A consumer whose only registry lists `addr`, referencing the greeter with
/// `compression`.
async fn consumer_of(
    addr: &str,
    compression: Compression,
) -> (Application, GreeterClient<ReferenceChannel>) {
    let mut config = referencing(
        common::config("compressing-consumer"),
        "helloworld.Greeter",
        compressing(compression),
    );
    config.registries.insert(
        "default".to_owned(),
        RegistryConfig::new(format!("static://{addr}")),
    );
    let mut builder = Application::builder(config);
    let client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let app = builder.start().await.expect("the consumer starts");
    (app, client)
}

async fn hello(
    client: &GreeterClient<ReferenceChannel>,
    name: &str,
) -> Result<String, tonic::Status> {
    let request = HelloRequest {
        name: name.to_owned(),
        count: 0,
    };
    let reply = client.clone().say_hello(request).await?;
    Ok(reply.into_inner().message)
}

/// Our reference configured `compression: gzip` calling grpcio servers: one with
/// grpcio's defaults reads the request; one with gzip turned off refuses it as
/// gzip-compressed (grpcio's own check of `grpc-encoding`, the only one a grpcio
/// server shows), and takes the same call from a reference configured `none`. A reply
/// grpcio compresses is decompressed for the generated client, which accepts no
/// compression itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_reference_compresses_for_grpcio_servers() {
    let Some(python) = Need::Python.get("our_reference_compresses_for_grpcio_servers") else {
        return;
    };
    let servers = PythonServers::start(&python).await;
    let name = "gzip ".repeat(50);

    let (gzip_accepting, client) = consumer_of(&servers.accepting, Compression::Gzip).await;
    assert_eq!(
        hello(&client, &name).await.unwrap(),
        format!("Hello, {name}!")
    );
    let compressed_reply = "compressed-reply ".repeat(20);
    let reply = hello(&client, &compressed_reply).await;
    assert_eq!(reply.unwrap(), format!("Hello, {compressed_reply}!"));
    gzip_accepting.before_shutdown().await;
    // That reply did travel compressed: the same call, raw, to the same server.
    let request = HelloRequest {
        name: compressed_reply.clone(),
        count: 0,
    };
    let body = framed(false, &request.encode_to_vec(), None);
    let addr = servers.accepting.parse().unwrap();
    let headers = [("grpc-accept-encoding", "gzip")];
    let answer = tokio::time::timeout(CALL_BOUND, grpc::exchange(addr, SAY_HELLO, &headers, body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.headers["grpc-encoding"], "gzip");
    assert!(
        answer.messages().unwrap()[0].0,
        "grpcio flagged it compressed"
    );

    let (gzip_refused, client) = consumer_of(&servers.identity_only, Compression::Gzip).await;
    let status = hello(&client, &name)
        .await
        .expect_err("gzip is disabled there");
    assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
    assert!(
        status
            .message()
            .contains("Compression algorithm 'gzip' is disabled"),
        "{status:?}"
    );
    gzip_refused.before_shutdown().await;

    let (plain, client) = consumer_of(&servers.identity_only, Compression::None).await;
    assert_eq!(
        hello(&client, &name).await.unwrap(),
        format!("Hello, {name}!")
    );
    plain.before_shutdown().await;
    servers.stop().await;
}
