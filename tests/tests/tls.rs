//! Issue 12, rule 7: TLS between our consumers and providers, with certificates the test
//! makes (`rcgen`, `rpc_testkit::tls`):
//!
//! - a provider with `protocol.tls` serves consumers that verify it (`consumer.tls.ca`,
//!   `domain`); a consumer trusting another CA is refused;
//! - the provider's certificate is rotated on disk under a steady load: new connections
//!   get the new certificate within the reload interval, and no call fails;
//! - mutual TLS (`protocol.tls.client_ca`): a consumer with a certificate from that CA is
//!   served, one without a certificate or with one from another CA is not.
//!
//! The grpcio client over TLS is in `tls_python.rs`, etcd over TLS in `tls_etcd.rs`.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::registry::MemoryHub;
use rpc::{Application, Config};
use rpc_testkit::load::{self, LoadOptions};
use rpc_testkit::services::GreeterProvider;
use rpc_testkit::tls::{Leaf, TestCa};
use rpc_transport::{ClientTls, ServerTlsFiles};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tonic::Code;

const NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

async fn provider(hub: &MemoryHub, tls: ServerTlsFiles) -> Application {
    let mut config = common::config("tls-provider");
    config.protocol.tls = Some(tls);
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.start().await.expect("the TLS provider starts")
}

/// A consumer of the greeter with `tls`; `check` off, so a refused TLS handshake shows
/// in the calls rather than failing start-up.
async fn consumer(
    hub: &MemoryHub,
    tls: ClientTls,
) -> (Application, GreeterClient<rpc::ReferenceChannel>) {
    let mut config: Config = common::config("tls-consumer");
    config.consumer.tls = Some(tls);
    config.consumer.check = false;
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    let client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let app = builder.start().await.expect("the consumer starts");
    (app, client)
}

fn verifying(ca: &Path) -> ClientTls {
    ClientTls {
        ca: ca.to_owned(),
        domain: Some("localhost".to_owned()),
        ..ClientTls::default()
    }
}

fn with_identity(ca: &Path, leaf: &Leaf) -> ClientTls {
    ClientTls {
        cert: Some(leaf.cert.clone()),
        key: Some(leaf.key.clone()),
        ..verifying(ca)
    }
}

async fn hello(client: &mut GreeterClient<rpc::ReferenceChannel>) -> Result<String, tonic::Status> {
    let request = HelloRequest {
        name: "tls".to_owned(),
        ..Default::default()
    };
    client
        .say_hello(request)
        .await
        .map(|reply| reply.into_inner().message)
}

/// The certificate (DER) a fresh TLS connection to `addr` is shown.
async fn presented_certificate(addr: SocketAddr, ca: &Path) -> Vec<u8> {
    let mut roots = RootCertStore::empty();
    let pem = std::fs::read(ca).expect("CA file");
    for cert in rustls_pemfile_certs(&pem) {
        roots.add(cert).expect("a CA certificate");
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connects");
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("a name"), tcp)
        .await
        .expect("a TLS handshake");
    let (_, session) = tls.get_ref();
    assert_eq!(session.alpn_protocol(), Some(&b"h2"[..]), "ALPN h2");
    session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| leaf.to_vec())
        .expect("a certificate")
}

fn rustls_pemfile_certs(
    pem: &[u8],
) -> Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    tokio_rustls::rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_provider_serves_verifying_consumers_and_rotates_its_certificate_without_a_failed_call()
 {
    common::logs();
    let dir = tempfile::tempdir().expect("a directory");
    let ca = TestCa::new(dir.path(), "main").expect("a CA");
    let first = ca.issue("provider", &NAMES).expect("a certificate");
    let hub = MemoryHub::new();
    let provider = provider(
        &hub,
        ServerTlsFiles {
            reload_interval: Duration::from_millis(100),
            ..ServerTlsFiles::new(&first.cert, &first.key)
        },
    )
    .await;
    let addr = provider.local_addr().expect("listens");
    assert_eq!(presented_certificate(addr, ca.ca()).await, first.der);

    let (verifier, client) = consumer(&hub, verifying(ca.ca())).await;
    let reply = hello(&mut client.clone()).await.expect("a call over TLS");
    assert!(reply.contains("Hello, tls!"), "{reply}");

    // A steady load while the certificate is rotated on disk.
    let (load_tx, load_rx) = tokio::sync::oneshot::channel();
    let caller = client.clone();
    let running = tokio::spawn(load::run(
        LoadOptions::new(200, Duration::from_secs(3)),
        move |_| {
            let mut client = caller.clone();
            async move { hello(&mut client).await }
        },
        move |load| {
            let _ = load_tx.send(load);
        },
    ));
    let load = load_rx.await.expect("the load starts");
    tokio::time::sleep(Duration::from_millis(500)).await;
    load.set_restarting(true);
    let second = ca
        .write_leaf(&NAMES, &first.cert, &first.key)
        .expect("a new certificate");
    let rotated = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if presented_certificate(addr, ca.ca()).await == second.der {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(rotated.is_ok(), "new connections get the new certificate");
    load.set_restarting(false);
    let record = running.await.expect("the load runs");
    println!(
        "rotation under load: {} calls, {} failed ({} while rotating)",
        record.sent,
        record.failed(),
        record.during_restart.len()
    );
    assert_eq!(record.failed(), 0, "{:?}", record.failure_samples);

    // A consumer that trusts another CA is refused: it cannot verify the provider.
    let other = TestCa::new(dir.path(), "other").expect("a CA");
    let (stranger, mut strange_client) = consumer(&hub, verifying(other.ca())).await;
    let refused = hello(&mut strange_client)
        .await
        .expect_err("an unverified provider is not called");
    println!("consumer trusting another CA: {refused:?}");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

    stranger.before_shutdown().await;
    verifier.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_serves_only_consumers_with_a_certificate_from_its_client_ca() {
    common::logs();
    let dir = tempfile::tempdir().expect("a directory");
    let ca = TestCa::new(dir.path(), "main").expect("a CA");
    let server = ca.issue("provider", &NAMES).expect("a certificate");
    let hub = MemoryHub::new();
    let provider = provider(
        &hub,
        ServerTlsFiles {
            client_ca: Some(ca.ca().to_owned()),
            ..ServerTlsFiles::new(&server.cert, &server.key)
        },
    )
    .await;

    let member = ca.issue("consumer", &["consumer"]).expect("a certificate");
    let (admitted, mut client) = consumer(&hub, with_identity(ca.ca(), &member)).await;
    let reply = hello(&mut client)
        .await
        .expect("a call with a client certificate");
    assert!(reply.contains("Hello, tls!"), "{reply}");

    let (anonymous, mut client) = consumer(&hub, verifying(ca.ca())).await;
    let refused = hello(&mut client)
        .await
        .expect_err("no client certificate, no call");
    println!("without a client certificate: {refused:?}");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

    let other = TestCa::new(dir.path(), "other").expect("a CA");
    let outsider = other
        .issue("outsider", &["outsider"])
        .expect("a certificate");
    let (foreign, mut client) = consumer(&hub, with_identity(ca.ca(), &outsider)).await;
    let refused = hello(&mut client)
        .await
        .expect_err("a certificate from another CA, no call");
    println!("with a certificate from another CA: {refused:?}");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

    for app in [admitted, anonymous, foreign] {
        app.before_shutdown().await;
    }
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}

/// The consumer's TLS files are read at each dial, and a file that cannot be read fails
/// that dial only (issue 35): a key file caught half-written by a rotation fails the
/// calls made while it is broken, and the first dial after it is whole again serves —
/// nothing about the instance is remembered as gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_key_broken_at_one_dial_is_read_again_at_the_next() {
    common::logs();
    let dir = tempfile::tempdir().expect("a directory");
    let ca = TestCa::new(dir.path(), "main").expect("a CA");
    let server = ca.issue("provider", &NAMES).expect("a certificate");
    let hub = MemoryHub::new();
    let provider = provider(
        &hub,
        ServerTlsFiles {
            client_ca: Some(ca.ca().to_owned()),
            ..ServerTlsFiles::new(&server.cert, &server.key)
        },
    )
    .await;
    let member = ca.issue("consumer", &["consumer"]).expect("a certificate");
    let whole_key = std::fs::read(&member.key).expect("the key");
    std::fs::write(&member.key, &whole_key[..whole_key.len() / 2]).expect("half a key");
    let (consumer, mut client) = consumer(&hub, with_identity(ca.ca(), &member)).await;

    let refused = hello(&mut client)
        .await
        .expect_err("no dial with half a key");
    println!("with half a key: {refused:?}");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        format!("{refused:?}").contains(&member.key.display().to_string()),
        "the error names the file: {refused:?}"
    );

    std::fs::write(&member.key, &whole_key).expect("the whole key again");
    let reply = hello(&mut client)
        .await
        .expect("the next dial reads the whole key");
    assert!(reply.contains("Hello, tls!"), "{reply}");

    consumer.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}
