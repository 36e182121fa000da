//! Issue 12, rule 7: a gRPC client that is not ours — Python's grpcio — calls a provider
//! over TLS, verifying it against a CA the test makes, and over mutual TLS presenting a
//! client certificate (without one it is refused).
//!
//! Needs `RPC_TEST_PYTHON`, a Python with `grpcio` and `grpcio-tools` (`.ci/run` creates
//! `.venv` and sets it). Without it the test says it was skipped and why.

mod common;

use std::process::Command;
use std::time::Duration;

use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc_testkit::external::Need;
use rpc_testkit::services::GreeterProvider;
use rpc_testkit::tls::TestCa;
use rpc_transport::ServerTlsFiles;

/// Runs the grpcio TLS client against `target`; its output.
async fn grpcio(python: String, target: String, args: Vec<String>) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/greeter_tls_client.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(proto::PROTO_DIR)
            .arg(target)
            .args(args)
            .output()
            .expect("python runs")
    })
    .await
    .expect("the client ran");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the python client failed");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_calls_a_provider_over_tls_and_mutual_tls() {
    let Some(python) = Need::Python.get("python_grpcio_calls_a_provider_over_tls_and_mutual_tls")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("a directory");
    let ca = TestCa::new(dir.path(), "main").expect("a CA");
    let server = ca
        .issue("provider", &["provider.test", "127.0.0.1"])
        .expect("a certificate");
    let client = ca.issue("client", &["client"]).expect("a certificate");
    let path = |p: &std::path::Path| p.display().to_string();

    for mutual in [false, true] {
        let hub = MemoryHub::new();
        let mut config = common::config("tls-provider");
        config.protocol.tls = Some(ServerTlsFiles {
            client_ca: mutual.then(|| ca.ca().to_owned()),
            ..ServerTlsFiles::new(&server.cert, &server.key)
        });
        let mut builder = common::builder_with(config, &hub, Duration::ZERO);
        builder.service(GreeterServer::new(GreeterProvider));
        let provider = builder.start().await.expect("the TLS provider starts");
        let target = provider.local_addr().expect("listens").to_string();
        let verify = vec![path(ca.ca()), "provider.test".to_owned()];

        let with_identity = [verify.clone(), vec![path(&client.cert), path(&client.key)]].concat();
        let stdout = grpcio(python.clone(), target.clone(), with_identity).await;
        assert!(
            stdout.contains("unary: Hello, grpcio over TLS!"),
            "mutual={mutual}: {stdout}"
        );
        let stdout = grpcio(python.clone(), target, verify).await;
        if mutual {
            assert!(
                stdout.contains("refused: UNAVAILABLE"),
                "no client certificate: {stdout}"
            );
        } else {
            assert!(
                stdout.contains("unary: Hello, grpcio over TLS!"),
                "{stdout}"
            );
        }
        let report = provider.before_shutdown().await;
        assert_eq!(report.exit_code(), 0, "{report}");
    }
}
