//! `GET /metrics` as Prometheus reads it: the text of a provider and a consumer that
//! have made calls (histograms, labelled counters, the process metrics) goes through the
//! Prometheus Python client's parser (`prometheus_client.parser`), a real exposition
//! parser and not ours, and every family and label it yields is what
//! docs/observability.md says.
//!
//! Needs `RPC_TEST_PYTHON` with `prometheus-client` (`scripts/test.sh` installs it, and
//! sets `RPC_TEST_REQUIRE_PYTHON=1`).

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use rpc::registry::MemoryHub;
use rpc_testkit::external::Need;

/// The parsed samples of `text`: `name{labels} value`, one per line.
fn parse(python: &str, text: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/parse_metrics.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("the text is written");
    let output = child.wait_with_output().expect("python ends");
    assert!(
        output.status.success(),
        "the Prometheus parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prometheus_parser_reads_every_metric_with_its_labels() {
    let Some(python) = Need::Python.get("the_prometheus_parser_reads_every_metric_with_its_labels")
    else {
        return;
    };
    let hub = MemoryHub::new();
    let provider = common::greeter_provider(&hub).await;
    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.expect("consumer starts");
    let request = HelloRequest {
        name: "parser".to_owned(),
        count: 1,
    };
    client.say_hello(request).await.expect("a call");

    let samples = parse(&python, &consumer.metrics().encode())
        + &parse(&python, &provider.metrics().encode());
    let sample = |prefix: &str| {
        samples
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no sample {prefix}… in:\n{samples}"))
    };
    let addr = provider.local_addr().expect("the provider listens");
    let picks = sample("rpc_client_picks_total{");
    assert!(
        picks.contains("rpc_service=\"helloworld.Greeter\"")
            && picks.contains(&format!("server_address=\"{addr}\""))
            && picks.ends_with(" 1.0"),
        "{picks}"
    );
    assert!(
        !samples.contains("instance=\""),
        "no label Prometheus would rename to exported_instance:\n{samples}"
    );
    let calls = sample("rpc_client_call_duration_seconds_count{");
    assert!(calls.contains("rpc_grpc_status_code=\"0\""), "{calls}");
    let served = sample("rpc_server_call_duration_seconds_count{");
    assert!(served.contains("rpc_method=\"SayHello\""), "{served}");
    for family in [
        "process_cpu_seconds_total{",
        "process_resident_memory_bytes{",
        "process_open_fds{",
        "process_start_time_seconds{",
        "rpc_build_info{",
        "rpc_lifecycle_phase{",
    ] {
        sample(family);
    }
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}
