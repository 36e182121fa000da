//! Issue 12, rule 7: the etcd backend over TLS, against a real etcd the test starts with
//! certificates it makes (HTTPS for clients, `--client-cert-auth`): a provider registers
//! and a consumer finds and calls it through `etcd://...?tls_ca=..&tls_cert=..&tls_key=..`;
//! the same etcd without the TLS parameters is unreachable.
//!
//! Needs the `etcd` binary (the Debian package `etcd-server`, which `scripts/test.sh`
//! installs). Without it the test says it was skipped, and with
//! `RPC_TEST_REQUIRE_REGISTRIES=1` (as in CI) it fails instead. The etcd it starts is
//! stopped by the test (the child is killed when dropped).

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::config::RegistryConfig;
use rpc::registry::{RegistryUrl, etcd::EtcdRegistry};
use rpc::{Application, Config};
use rpc_testkit::services::GreeterProvider;
use rpc_testkit::tls::TestCa;
use tokio::process::{Child, Command};
use tokio::time::Instant;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// etcd with TLS for clients (client certificates required) on a free port; its child
/// process and the port.
fn start_etcd(dir: &Path, ca: &TestCa) -> Option<(Child, u16)> {
    let server = ca
        .issue("etcd", &["localhost", "127.0.0.1"])
        .expect("a certificate");
    let (port, peer) = (free_port(), free_port());
    let client_url = format!("https://127.0.0.1:{port}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = std::fs::File::create(dir.join("etcd.log")).expect("a log file");
    let spawned = Command::new("etcd")
        .args(["--name", "rpc-tls"])
        .arg("--data-dir")
        .arg(dir.join("etcd-data"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("rpc-tls={peer_url}")])
        .arg("--cert-file")
        .arg(&server.cert)
        .arg("--key-file")
        .arg(&server.key)
        .arg("--trusted-ca-file")
        .arg(ca.ca())
        .arg("--client-cert-auth")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn();
    match spawned {
        Ok(child) => Some((child, port)),
        Err(error) => {
            assert!(
                std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
                "etcd cannot be started ({error}) but RPC_TEST_REQUIRE_REGISTRIES is set"
            );
            println!(
                "SKIPPED etcd over TLS: `etcd` cannot be started: {error} (scripts/test.sh installs it)"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_backend_registers_and_discovers_over_tls() {
    common::logs();
    let dir = tempfile::tempdir().expect("a directory");
    let ca = TestCa::new(dir.path(), "etcd").expect("a CA");
    let Some((mut etcd, port)) = start_etcd(dir.path(), &ca) else {
        return;
    };
    let client = ca.issue("client", &["client"]).expect("a certificate");
    let url = format!(
        "etcd://127.0.0.1:{port}?tls_ca={}&tls_cert={}&tls_key={}&tls_domain=localhost&prefix=/tls-{:08x}&ttl=5s",
        ca.ca().display(),
        client.cert.display(),
        client.key.display(),
        fastrand::u32(..)
    );
    let parsed = RegistryUrl::parse(&url).expect("a registry URL");

    // Ready: a TLS client connects (etcd takes a moment to start).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match EtcdRegistry::connect(&parsed).await {
            Ok(_) => break,
            Err(error) => {
                if let Ok(Some(status)) = etcd.try_wait() {
                    let log =
                        std::fs::read_to_string(dir.path().join("etcd.log")).unwrap_or_default();
                    panic!("etcd exited ({status}) during start-up:\n{log}");
                }
                assert!(
                    Instant::now() < deadline,
                    "etcd over TLS not ready: {error}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    // Without TLS the same etcd does not answer.
    let plain = RegistryUrl::parse(&format!("etcd://127.0.0.1:{port}?connect_timeout=1s"))
        .expect("a registry URL");
    let refused = EtcdRegistry::connect(&plain)
        .await
        .expect_err("plain HTTP/2 to a TLS etcd fails");
    println!("without TLS: {refused}");

    let with_etcd = |name: &str| {
        let mut config: Config = common::config(name);
        config
            .registries
            .insert("default".to_owned(), RegistryConfig::new(url.clone()));
        Application::builder(config)
    };
    let mut builder = with_etcd("tls-etcd-provider");
    builder.service(GreeterServer::new(GreeterProvider));
    let provider = builder
        .start()
        .await
        .expect("the provider registers over TLS");
    let mut builder = with_etcd("tls-etcd-consumer");
    let mut greeter = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder
        .start()
        .await
        .expect("the consumer finds the provider");
    let reply = greeter
        .say_hello(HelloRequest {
            name: "etcd over TLS".to_owned(),
            ..Default::default()
        })
        .await
        .expect("a call to the provider found through etcd over TLS");
    println!("{}", reply.get_ref().message);

    consumer.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
    etcd.kill().await.expect("etcd stops");
}
