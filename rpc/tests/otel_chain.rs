//! One trace across four processes' worth of gRPC, two of them not ours: a Python grpcio
//! client instrumented by OpenTelemetry (`opentelemetry-instrumentation-grpc`) → our
//! provider A, whose handler calls → our provider B, whose handler calls → a Python
//! grpcio server instrumented the same way. The Python spans come from each side's SDK
//! (printed as JSON lines), ours from an in-process OTLP receiver; every span is in the
//! client's trace, each hop's server span the child of the span that called it.
//!
//! Needs `RPC_TEST_PYTHON` with grpcio, grpcio-tools and OpenTelemetry's SDK and gRPC
//! instrumentation (`scripts/test.sh` installs them into `.venv`).

mod otlp_receiver;

use std::process::Stdio;
use std::sync::Arc;

use lossless_rpc::observe::otlp::OtlpExporter;
use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, Config, ConfigFormat, Instance, ReferenceChannel, ServiceKey};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use otlp_receiver::{attribute, hex, receiver};
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::{Greeter, GreeterServer};
use proto::greeter::{HelloReply, HelloRequest};
use rpc_core::Registry;
use rpc_testkit::external::Need;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tonic::Status;
use tracing_subscriber::prelude::*;

const PYTHON_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/python");

/// Provider A: SayHello calls B's Echo.
struct Gateway(EchoClient<ReferenceChannel>);

#[tonic::async_trait]
impl Greeter for Gateway {
    async fn say_hello(
        &self,
        request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, Status> {
        let payload = bytes::Bytes::from(request.into_inner().name);
        let echoed = self
            .0
            .clone()
            .echo(EchoRequest {
                payload,
                delay_ms: None,
            })
            .await?;
        Ok(tonic::Response::new(HelloReply {
            message: echoed.into_inner().provider,
            provider: String::new(),
        }))
    }

    type SayHelloStreamStream = futures_util::stream::Empty<Result<HelloReply, Status>>;

    async fn say_hello_stream(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<Self::SayHelloStreamStream>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

/// Provider B: Echo calls the Python server's SayHello.
struct Relay(GreeterClient<ReferenceChannel>);

#[tonic::async_trait]
impl Echo for Relay {
    async fn echo(
        &self,
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<EchoReply>, Status> {
        let name = String::from_utf8_lossy(&request.into_inner().payload).into_owned();
        let hello = HelloRequest { name, count: 0 };
        let reply = self.0.clone().say_hello(hello).await?.into_inner();
        Ok(tonic::Response::new(EchoReply {
            payload: bytes::Bytes::new(),
            provider: reply.message,
        }))
    }
}

fn config(yaml: &str, name: &str) -> Config {
    let text = format!(
        "application: {{ name: {name}, logging: false }}\n\
         admin: {{ port: 0 }}\n\
         graceful_shutdown: {{ internal_signal: false }}\n{yaml}"
    );
    Config::from_str(&text, ConfigFormat::Yaml, &format!("{name}.yaml")).expect("valid")
}

/// A Python span as `otel_spans.py` prints it: (kind, trace id, span id, parent id).
fn python_spans(output: &str) -> Vec<(String, String, String, Option<String>)> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("span "))
        .map(|json| {
            let span: serde_json::Value = serde_json::from_str(json).expect("a JSON span");
            let text = |key: &str| span[key].as_str().map(str::to_owned);
            (
                text("kind").unwrap(),
                text("trace_id").unwrap(),
                text("span_id").unwrap(),
                text("parent_id"),
            )
        })
        .collect()
}

// One thread: the subscriber is this thread's default, and every span of ours is made
// on it.
#[tokio::test(flavor = "current_thread")]
async fn one_trace_from_a_python_client_through_two_providers_to_a_python_server() {
    let test = "one_trace_from_a_python_client_through_two_providers_to_a_python_server";
    let Some(python) = Need::Python.get(test) else {
        return;
    };
    let (received, addr) = receiver().await;
    let mut exporting = Config::default();
    exporting.application.name = "chain".into();
    exporting.tracing.otlp_endpoint = Some(format!("http://{addr}"));
    let exporter = OtlpExporter::start(&exporting)
        .unwrap()
        .expect("an endpoint");
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(exporter.layer()));

    // C: the Python server, registered by hand as the one helloworld.Greeter instance.
    let mut server = tokio::process::Command::new(&python)
        .arg(format!("{PYTHON_DIR}/otel_greeter_server.py"))
        .arg(proto::PROTO_DIR)
        .current_dir(PYTHON_DIR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut server_out = BufReader::new(server.stdout.take().unwrap());
    let mut first = String::new();
    server_out.read_line(&mut first).await.unwrap();
    let port: u16 = first
        .strip_prefix("port ")
        .and_then(|port| port.trim().parse().ok())
        .unwrap_or_else(|| panic!("the Python server says its port: {first:?}"));
    let hub = MemoryHub::new();
    let registrar = hub.client();
    let c = Instance::new(ServiceKey::new("helloworld.Greeter"), "127.0.0.1", port);
    registrar.register(&c).await.unwrap();

    let mut b = Application::builder(config("", "b"));
    b.registry("default", Arc::new(hub.client()));
    let greeter = GreeterClient::new(b.reference("helloworld.Greeter"));
    b.service(EchoServer::new(Relay(greeter)));
    let b = b.start().await.expect("B starts");
    // A's own Greeter in a group of its own: B's reference reaches only C.
    let mut a = Application::builder(config(
        "provider:\n  services:\n    helloworld.Greeter: { group: gateway }\n",
        "a",
    ));
    a.registry("default", Arc::new(hub.client()));
    let echo = EchoClient::new(a.reference("echo.Echo"));
    a.service(GreeterServer::new(Gateway(echo)));
    let a = a.start().await.expect("A starts");

    let target = a.local_addr().unwrap().to_string();
    let client = tokio::process::Command::new(&python)
        .arg(format!("{PYTHON_DIR}/otel_greeter_client.py"))
        .arg(proto::PROTO_DIR)
        .arg(&target)
        .current_dir(PYTHON_DIR)
        .kill_on_drop(true)
        .output()
        .await
        .expect("python runs");
    let client_out = String::from_utf8_lossy(&client.stdout).into_owned();
    println!("{client_out}{}", String::from_utf8_lossy(&client.stderr));
    assert!(client.status.success(), "the Python client failed");
    assert!(client_out.contains("reply: Hello, chain!"), "{client_out}");

    exporter.shutdown().await.unwrap();
    drop(server.stdin.take());
    let mut rest = String::new();
    server_out.read_to_string(&mut rest).await.unwrap();
    server.wait().await.unwrap();
    println!("{rest}");

    let (_, trace, client_span, _) = python_spans(&client_out)
        .into_iter()
        .find(|(kind, ..)| kind == "CLIENT")
        .expect("the Python client's span");
    let (_, server_trace, _, server_parent) = python_spans(&rest)
        .into_iter()
        .find(|(kind, ..)| kind == "SERVER")
        .expect("the Python server's span");
    let ours = received.0.lock().clone();
    let ours: Vec<&Span> = ours.iter().map(|(_, span)| span).collect();
    let served = |name: &str| {
        ours.iter()
            .find(|span| span.name == name && span.kind == SpanKind::Server as i32)
            .unwrap_or_else(|| panic!("our server span {name}"))
    };
    let attempt_to = |port: u16| {
        ours.iter()
            .find(|span| attribute(span, "server.port") == Some(port.to_string()))
            .unwrap_or_else(|| panic!("an attempt to port {port}"))
    };
    let (a_served, b_served) = (
        served("helloworld.Greeter/SayHello"),
        served("echo.Echo/Echo"),
    );
    let a_attempt = attempt_to(b.local_addr().unwrap().port());
    let b_attempt = attempt_to(port);
    println!(
        "otel_chain: trace {trace}: python client {client_span} → A {} → A's attempt {} → B {} → B's attempt {} → python server (parent {server_parent:?})",
        hex(&a_served.span_id),
        hex(&a_attempt.span_id),
        hex(&b_served.span_id),
        hex(&b_attempt.span_id),
    );
    for span in [a_served, a_attempt, b_served, b_attempt] {
        assert_eq!(
            hex(&span.trace_id),
            trace,
            "{}: one trace end to end",
            span.name
        );
    }
    assert_eq!(
        server_trace, trace,
        "the Python server's span: one trace end to end"
    );
    assert_eq!(
        hex(&a_served.parent_span_id),
        client_span,
        "A under the Python client"
    );
    assert_eq!(
        b_served.parent_span_id, a_attempt.span_id,
        "B under A's attempt"
    );
    assert_eq!(
        server_parent,
        Some(hex(&b_attempt.span_id)),
        "the Python server under B's attempt"
    );

    a.before_shutdown().await;
    b.before_shutdown().await;
}
