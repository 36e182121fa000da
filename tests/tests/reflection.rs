//! gRPC server reflection as a configuration switch (`provider.reflection`), asked by a
//! reflection client that is not ours: Python's grpcio-reflection
//! (`tests/python/reflection_client.py`), over both protocol versions.
//!
//! The Python tests need `RPC_TEST_PYTHON`: a Python with `grpcio` and
//! `grpcio-reflection` (`scripts/test.sh` installs both into `.venv` and sets it, with
//! `RPC_TEST_REQUIRE_PYTHON=1`). Without it, and not required, they say they were
//! skipped and why.

mod common;

use std::process::Stdio;
use std::time::Duration;

use proto::echo::echo_server::EchoServer;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationError, Config, ConfigFormat};
use rpc_testkit::external::Need;
use rpc_testkit::services::{EchoProvider, GreeterProvider};

/// Bound on the Python client's whole run.
const CLIENT_BOUND: Duration = Duration::from_secs(60);

/// A provider of the greeter and the echo service, with reflection `on` or off and
/// `proto::FILE_DESCRIPTOR_SET` registered (it also describes the interop services,
/// which this provider does not serve).
async fn provider(hub: &MemoryHub, on: bool) -> Application {
    let mut config = common::config("reflection-provider");
    config.provider.reflection = on;
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.service(EchoServer::new(EchoProvider { work_ms: 0 }));
    builder.file_descriptor_set(proto::FILE_DESCRIPTOR_SET);
    builder.start().await.expect("the provider starts")
}

/// What `reflection_client.py` printed about `app`'s listener.
async fn ask(python: &str, app: &Application) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/reflection_client.py");
    let addr = app.local_addr().expect("the provider listens").to_string();
    let child = tokio::process::Command::new(python)
        .arg(script)
        .arg(&addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let output = tokio::time::timeout(CLIENT_BOUND, child.wait_with_output())
        .await
        .expect("the reflection client finishes within its bound")
        .expect("the reflection client runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the reflection client failed");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_reflection_lists_the_services_and_describes_a_method() {
    let Some(python) = Need::Python.get("grpcio_reflection_lists_the_services") else {
        return;
    };
    let hub = MemoryHub::new();
    let app = provider(&hub, true).await;
    let stdout = ask(&python, &app).await;
    // What this provider serves, not all that the descriptor set describes (no
    // grpc.testing.TestService).
    let served = "echo.Echo,grpc.health.v1.Health,grpc.reflection.v1.ServerReflection,\
                  grpc.reflection.v1alpha.ServerReflection,helloworld.Greeter";
    assert!(
        stdout.contains(&format!("v1alpha services: {served}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("SayHello input: helloworld.HelloRequest (fields name,count)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("v1 services: {served}\n")),
        "{stdout}"
    );
    app.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_switch_reflection_is_unimplemented() {
    let Some(python) = Need::Python.get("without_the_switch_reflection_is_unimplemented") else {
        return;
    };
    let hub = MemoryHub::new();
    let app = provider(&hub, false).await;
    let stdout = ask(&python, &app).await;
    assert!(stdout.contains("v1alpha: UNIMPLEMENTED"), "{stdout}");
    assert!(stdout.contains("v1: UNIMPLEMENTED"), "{stdout}");
    app.before_shutdown().await;
}

/// Turned on with nothing to describe, start-up fails before anything starts, naming
/// the key and the file, as the other configuration-against-code checks do.
#[tokio::test]
async fn the_switch_without_a_descriptor_set_fails_start_up_naming_key_and_file() {
    let text = "application: { name: no-descriptors, logging: false }\n\
                admin: { port: 0 }\n\
                graceful_shutdown: { internal_signal: false }\n\
                provider: { reflection: true }\n";
    let config = Config::from_str(text, ConfigFormat::Yaml, "provider.yaml").unwrap();
    let hub = MemoryHub::new();
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    let error = match builder.start().await {
        Ok(app) => {
            app.before_shutdown().await;
            panic!("start-up succeeded without a descriptor set");
        }
        Err(error) => error,
    };
    assert!(matches!(error, ApplicationError::Config(_)), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("provider.reflection"), "{message}");
    assert!(message.contains("provider.yaml"), "{message}");
    assert!(message.contains("file_descriptor_set"), "{message}");
    assert_eq!(error.exit_code(), 2, "a configuration error");
}
