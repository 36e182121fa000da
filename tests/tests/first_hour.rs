//! Issue 15, a new user's first hour, at the application's edge: configuration that names
//! nothing the code registered fails start-up (key, file, closest name); a reference to
//! the application's own service starts; channel options out of range fail start-up; a
//! reference whose version differs from what the application provides says so; a
//! wildcard bind advertises a reachable address; and start-up installs a logging
//! subscriber unless told not to or one exists.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationError, Config, ConfigError, ConfigFormat, ServiceKey};
use rpc_testkit::services::GreeterProvider;

/// `text` as the file `app.yaml`, with the test defaults (no signals, no log subscriber,
/// the admin endpoint on a free port: tests run side by side).
fn config(text: &str) -> Config {
    let mut config = Config::from_str(text, ConfigFormat::Yaml, "app.yaml").unwrap();
    config.graceful_shutdown.internal_signal = false;
    config.application.logging = false;
    config.admin.port = 0;
    config
}

async fn start_greeter(config: Config, hub: &MemoryHub) -> Result<Application, ApplicationError> {
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.start().await
}

#[tokio::test]
async fn a_misspelt_service_fails_start_up_naming_key_file_and_the_right_name() {
    let hub = MemoryHub::new();
    let error = start_greeter(
        config("provider:\n  services:\n    helloworld.Gretter: { weight: 5 }\n"),
        &hub,
    )
    .await
    .err()
    .expect("the typo is refused");
    assert!(
        matches!(error, ApplicationError::Config(ConfigError::Invalid { .. })),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "app.yaml: key `provider.services.helloworld.Gretter`: names no service this \
         application provides; did you mean `helloworld.Greeter`?"
    );
    assert!(
        hub.instances(&ServiceKey::new("helloworld.Greeter"))
            .is_empty()
    );
}

#[tokio::test]
async fn channel_options_out_of_range_fail_start_up_before_anything_registers() {
    let hub = MemoryHub::new();
    let mut builder = common::builder_with(config(""), &hub, Duration::ZERO);
    let mut options = rpc::transport::ChannelOptions::default();
    // Past the protocol's largest window (h2 would panic at the first dial).
    options.initial_connection_window_size = u32::MAX;
    builder.channel_options(options);
    builder.service(GreeterServer::new(GreeterProvider));
    let error = builder.start().await.err().expect("refused");
    assert_eq!(
        error.to_string(),
        "channel option `initial_connection_window_size`: 4294967295 is not from 65535 to \
         2147483647"
    );
    assert!(
        hub.instances(&ServiceKey::new("helloworld.Greeter"))
            .is_empty()
    );
}

#[tokio::test]
async fn a_reference_in_the_wrong_case_fails_start_up() {
    let hub = MemoryHub::new();
    let mut builder = common::builder_with(
        config("consumer:\n  references:\n    helloworld.greeter: { timeout: 1ms }\n"),
        &hub,
        Duration::ZERO,
    );
    let _client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let error = builder.start().await.err().expect("refused");
    assert_eq!(
        error.to_string(),
        "app.yaml: key `consumer.references.helloworld.greeter`: names no reference this \
         application makes; did you mean `helloworld.Greeter`?"
    );
}

/// The README's first snippet: a service whose backend is a reference to itself. The
/// start-up check does not wait for a provider that is this process (registered in the
/// last step), and calls through the reference reach it once started.
#[tokio::test]
async fn a_reference_to_the_applications_own_service_starts_and_calls_it() {
    let hub = MemoryHub::new();
    // A check that waited for this provider would wait out an hour: the test's own bound
    // (far below it, far above any start) shows it did not wait, with no duration asserted.
    let mut builder = common::builder_with(
        config("consumer:\n  check_timeout: 1h\n"),
        &hub,
        Duration::ZERO,
    );
    let mut own = GreeterClient::new(builder.reference("helloworld.Greeter"));
    builder.service(GreeterServer::new(GreeterProvider));
    let app = tokio::time::timeout(Duration::from_secs(60), builder.start())
        .await
        .expect("start-up did not wait out check_timeout for its own provider")
        .expect("no wait for its own provider");
    let reply = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match own
                .say_hello(HelloRequest {
                    name: "me".into(),
                    count: 0,
                })
                .await
            {
                Ok(reply) => break reply.into_inner(),
                // The memory registry may not have delivered the registration yet.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
    .await
    .expect("the reference reaches this application");
    assert!(reply.message.contains("me"), "{reply:?}");
    app.before_shutdown().await;
}

/// The README's YAML of before: the provider has a version, the reference none. The
/// check fails as before, and now says what the application provides instead.
#[tokio::test]
async fn a_reference_that_misses_the_provided_version_says_what_is_provided() {
    let hub = MemoryHub::new();
    let mut config = config(
        "provider:\n  services:\n    helloworld.Greeter: { version: \"1.0.0\" }\n\
         consumer:\n  check_timeout: 200ms\n  references:\n    helloworld.Greeter: {}\n",
    );
    config.consumer.check_timeout = Duration::from_millis(200);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let _own = GreeterClient::new(builder.reference("helloworld.Greeter"));
    builder.service(GreeterServer::new(GreeterProvider));
    let error = builder
        .start()
        .await
        .err()
        .expect("no provider of version \"\"");
    assert!(
        matches!(error, ApplicationError::NoMatchingProvider { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("no provider appeared"), "{message}");
    assert!(
        message.contains(r#"provides `helloworld.Greeter (group "", version "1.0.0")`"#),
        "{message}"
    );
}

/// Bound to 0.0.0.0 with no advertise_host: the registered host is an address of this
/// machine that is not loopback (when it has one), never 127.0.0.1 by default.
#[tokio::test]
async fn a_wildcard_bind_registers_a_non_loopback_address_of_this_host() {
    let hub = MemoryHub::new();
    let app = start_greeter(config("protocol: { host: 0.0.0.0 }\n"), &hub)
        .await
        .unwrap();
    let instances = hub.instances(&ServiceKey::new("helloworld.Greeter"));
    let host: IpAddr = instances[0].host.parse().unwrap();
    // An address of this host: a socket binds to it.
    std::net::UdpSocket::bind((host, 0)).expect("an address of this machine");
    if host.is_loopback() {
        // Only acceptable when this machine has no other IPv4 address. A UDP `connect`
        // sends nothing; it only asks the kernel for a route (to a TEST-NET address).
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let routed = probe
            .connect("192.0.2.1:9")
            .ok()
            .and_then(|()| probe.local_addr().ok());
        assert!(
            routed.is_none_or(|addr| addr.ip().is_loopback()),
            "advertised loopback although {routed:?} exists"
        );
    }
    app.before_shutdown().await;
}

/// Runs the child program of these tests (`src/bin/logging_child.rs`: a provider
/// started and stopped once, with the logging `mode` sets up) and returns its stdout
/// and stderr. A process of its own, because a global subscriber can be installed only
/// once per process.
fn run_logging_child(mode: &str) -> (String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_logging_child"))
        .arg(mode)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn start_up_installs_a_default_subscriber_to_stderr() {
    let (_, stderr) = run_logging_child("default");
    assert!(
        stderr.contains("advertising providers at 127.0.0.1"),
        "{stderr}"
    );
    assert!(stderr.contains("graceful shutdown finished"), "{stderr}");
}

#[test]
fn logging_false_installs_nothing() {
    let (_, stderr) = run_logging_child("off");
    assert!(!stderr.contains("advertising"), "{stderr}");
}

#[test]
fn a_subscriber_the_application_installed_is_kept() {
    let (stdout, stderr) = run_logging_child("own");
    assert!(stdout.contains("advertising providers at"), "{stdout}");
    assert!(!stderr.contains("advertising"), "{stderr}");
}
