//! A plain gRPC client that is not ours — Python's grpcio — calls an exported service.
//!
//! Needs `RPC_TEST_PYTHON`: a Python with `grpcio`, `grpcio-tools` and
//! `grpcio-health-checking` (`scripts/test.sh` creates `.venv` and sets it, with
//! `RPC_TEST_REQUIRE_PYTHON=1`: in CI a missing Python fails the test). Without it, and
//! not required, the test says it was skipped and why.

mod common;

use std::process::Command;

use rpc::registry::MemoryHub;
use rpc_testkit::external::Need;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_calls_the_greeter_provider() {
    let Some(python) = Need::Python.get("python_grpcio_calls_the_greeter_provider") else {
        return;
    };
    let hub = MemoryHub::new();
    let provider = common::greeter_provider(&hub).await;
    let addr = provider.local_addr().unwrap().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/greeter_client.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(proto::PROTO_DIR)
            .arg(&addr)
            .output()
            .expect("python runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "python client failed");
    let addr = provider.local_addr().unwrap().to_string();
    assert!(
        stdout.contains(&format!("unary: Hello, python! from {addr}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("stream: Hello #1, py! | Hello #2, py!"),
        "{stdout}"
    );
    assert!(stdout.contains("status: INVALID_ARGUMENT"), "{stdout}");
    assert!(stdout.contains("health: SERVING"), "{stdout}");
    provider.before_shutdown().await;
}
