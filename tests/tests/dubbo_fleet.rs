//! A mixed fleet: our applications and real Dubbo peers — Apache Dubbo's Python SDK
//! (`apache-dubbo`: Triple over h2, ZooKeeper through kazoo, `tests/python/dubbo_peer.py`)
//! — in one ZooKeeper, each registry in Dubbo's layout (`format: dubbo`).
//!
//! Needs `RPC_TEST_ZOOKEEPER_URL` (`scripts/registries.sh`) and `RPC_TEST_PYTHON` with
//! `apache-dubbo` and `kazoo` (`scripts/test.sh` installs both into `.venv`); without
//! them, and not required, each test says it was skipped. Each test works under a ZooKeeper
//! root of its own (Dubbo's registry `group`), so tests side by side never see each other.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::config::{RegistryConfig, ServiceConfig};
use rpc::registry::RegistryFormat;
use rpc::registry::dubbo::DubboUrl;
use rpc::{Application, Config};
use rpc_testkit::external::Need;
use rpc_testkit::services::GreeterProvider;
use zookeeper_client::{Acls, Client as ZkClient, CreateMode};

const SERVICE: &str = "helloworld.Greeter";

/// One test's place in ZooKeeper: the server, and a root of its own.
struct DubboRoot {
    /// `host:port` of the ZooKeeper server.
    server: String,
    /// The root, without its leading `/` (Dubbo's registry `group`).
    name: String,
}

impl DubboRoot {
    /// A fresh root for `test` on `RPC_TEST_ZOOKEEPER_URL`, or `None` (after saying why)
    /// when ZooKeeper or the Python SDK is missing and not required.
    fn new(test: &str) -> Option<(Self, String)> {
        let python = Need::Python.get(test)?;
        let Ok(url) = std::env::var("RPC_TEST_ZOOKEEPER_URL") else {
            assert!(
                std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
                "RPC_TEST_ZOOKEEPER_URL is not set but RPC_TEST_REQUIRE_REGISTRIES is"
            );
            eprintln!(
                "SKIPPED {test}: RPC_TEST_ZOOKEEPER_URL is not set (scripts/test.sh sets it)"
            );
            return None;
        };
        let server = url.trim().trim_start_matches("zookeeper://");
        let server = server.split(['/', '?']).next().unwrap_or(server).to_owned();
        let name = format!("dubbo-{test}-{:08x}", fastrand::u32(..));
        Some((Self { server, name }, python))
    }

    /// Our registry entry for this root in Dubbo's layout.
    fn registry(&self) -> RegistryConfig {
        RegistryConfig::new(format!("zookeeper://{}?root=/{}", self.server, self.name))
            .with_format(RegistryFormat::Dubbo)
    }

    /// The Python SDK's registry address for this root.
    fn for_python(&self) -> String {
        format!("{}?group={}", self.server, self.name)
    }

    /// The providers directory of the greeter.
    fn providers(&self) -> String {
        format!("/{}/{SERVICE}/providers", self.name)
    }

    async fn client(&self) -> ZkClient {
        ZkClient::connect(&self.server)
            .await
            .expect("ZooKeeper session")
    }
}

fn config(name: &str, root: &DubboRoot) -> Config {
    let mut config = common::config(name);
    config.registries = [("main".to_owned(), root.registry())].into();
    config
}

/// Our greeter provider, registered in Dubbo's layout (version and group as given).
async fn provider(root: &DubboRoot, version: &str, group: &str) -> Application {
    let mut config = config("rust-provider", root);
    let service = ServiceConfig {
        version: version.to_owned(),
        group: group.to_owned(),
        ..ServiceConfig::default()
    };
    config.provider.services.insert(SERVICE.to_owned(), service);
    let mut builder = Application::builder(config);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.file_descriptor_set(proto::FILE_DESCRIPTOR_SET);
    builder.start().await.expect("provider starts")
}

/// Our consumer of the greeter, through Dubbo's layout.
async fn consumer(
    root: &DubboRoot,
    version: &str,
    group: &str,
) -> (Application, GreeterClient<rpc::ReferenceChannel>) {
    let mut config = config("rust-consumer", root);
    config.consumer.check = false;
    let reference = config
        .consumer
        .references
        .entry(SERVICE.to_owned())
        .or_default();
    reference.version = version.to_owned();
    reference.group = group.to_owned();
    let mut builder = Application::builder(config);
    let client = GreeterClient::new(builder.reference(SERVICE));
    (builder.start().await.expect("consumer starts"), client)
}

/// A Python Dubbo peer (`dubbo_peer.py`): killed on drop, so nothing outlives a test;
/// its log (stderr) is printed when the test fails.
struct PythonPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its stdout, line by line, read by a thread of its own (so every wait is bounded).
    lines: mpsc::Receiver<String>,
    log: tempfile::NamedTempFile,
}

/// Bound on waiting for a line of a peer: its start, its first call, its tally.
const LINE_WAIT: Duration = Duration::from_secs(60);

impl PythonPeer {
    fn start(python: &str, args: &[&str]) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/dubbo_peer.py");
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("the log file again"))
            .spawn()
            .expect("python runs");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            log,
        }
    }

    /// The next line it prints, waiting at most [`LINE_WAIT`] (blocking: call it through
    /// `spawn_blocking`).
    fn line(&mut self) -> String {
        self.lines.recv_timeout(LINE_WAIT).unwrap_or_else(|error| {
            panic!("the Python peer printed no line within {LINE_WAIT:?}: {error}")
        })
    }

    /// Closes its stdin (the signal to finish) and returns its last line; the process is
    /// then killed (a call the SDK never ended keeps a thread of it).
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        self.line()
    }
}

impl Drop for PythonPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.log.path()).unwrap_or_default();
            let lines: Vec<_> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(200)..];
            eprintln!(
                "the Python peer's log (its last 200 lines):\n{}",
                tail.join("\n")
            );
        }
    }
}

/// What the Python consumer printed at its end.
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct Tally {
    ok: u64,
    failed: u64,
    providers: std::collections::BTreeMap<String, u64>,
    errors: std::collections::BTreeMap<String, u64>,
}

fn tally(line: &str) -> Tally {
    serde_json::from_str(line).unwrap_or_else(|error| panic!("not a tally ({error}): {line}"))
}

/// Calls served by `app` so far (its server-side call metric).
fn served(app: &Application) -> u64 {
    app.metrics()
        .encode()
        .lines()
        .filter(|line| line.starts_with("rpc_server_call_duration_seconds_count{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dubbo_consumer_finds_our_provider_in_zookeeper_and_calls_it() {
    let Some((root, python)) = DubboRoot::new("a_dubbo_consumer_finds_our_provider") else {
        return;
    };
    let provider = provider(&root, "", "").await;
    let address = provider.local_addr().unwrap().to_string();

    // Registered as Dubbo 3 registers a provider at interface level.
    let zk = root.client().await;
    let children = zk
        .list_children(&root.providers())
        .await
        .unwrap_or_default();
    assert_eq!(children.len(), 1, "{children:?}");
    let url = DubboUrl::from_node_name(&children[0]).unwrap();
    assert_eq!((url.protocol.as_str(), url.path.as_str()), ("tri", SERVICE));
    assert_eq!(format!("{}:{}", url.host, url.port.unwrap()), address);
    for (key, value) in [
        ("interface", SERVICE),
        ("side", "provider"),
        ("application", "rust-provider"),
        ("methods", "SayHello,SayHelloStream"),
        ("weight", "100"),
    ] {
        assert_eq!(url.parameter(key), Some(value), "{key} in {url}");
    }
    assert!(
        url.parameter("timestamp")
            .is_some_and(|at| at.parse::<u64>().is_ok())
    );

    let for_python = root.for_python();
    let output = tokio::task::spawn_blocking(move || {
        let mut consumer =
            PythonPeer::start(&python, &["consume", proto::PROTO_DIR, &for_python, "200"]);
        let mut last = consumer.line();
        if last == "started" {
            last = consumer.line();
        }
        last
    })
    .await
    .unwrap();
    let tally = tally(&output);
    println!("python consumer: {tally:?}");
    assert_eq!((tally.ok, tally.failed), (200, 0), "{tally:?}");
    assert_eq!(tally.providers.get(&address), Some(&200));
    assert_eq!(provider.before_shutdown().await.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_consumer_finds_a_dubbo_provider_and_skips_entries_it_cannot_use() {
    let Some((root, python)) = DubboRoot::new("our_consumer_finds_a_dubbo_provider") else {
        return;
    };
    let port = free_port();
    let for_python = root.for_python();
    let mut dubbo_provider = tokio::task::spawn_blocking(move || {
        let mut peer = PythonPeer::start(
            &python,
            &["provide", proto::PROTO_DIR, &for_python, &port.to_string()],
        );
        assert_eq!(peer.line(), "ready");
        peer
    })
    .await
    .unwrap();

    // Entries a foreign peer may leave beside it: another protocol, no port, not a URL.
    let zk = root.client().await;
    let providers = root.providers();
    for bad in [
        "dubbo%3A%2F%2F127.0.0.1%3A20880%2Fhelloworld.Greeter%3Finterface%3Dhelloworld.Greeter",
        "tri%3A%2F%2F127.0.0.1%2Fhelloworld.Greeter",
        "not-a-url",
    ] {
        let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        zk.create(&format!("{providers}/{bad}"), b"", &options)
            .await
            .unwrap();
    }

    let (consumer, mut client) = consumer(&root, "", "").await;
    let expected = format!("127.0.0.1:{port}");
    for n in 0..50 {
        let name = format!("n{n}");
        let reply = loop {
            // The first call may come before the first listing: no provider yet.
            match client
                .say_hello(HelloRequest {
                    name: name.clone(),
                    count: 0,
                })
                .await
            {
                Ok(reply) => break reply.into_inner(),
                Err(status) if n == 0 && status.code() == tonic::Code::Unavailable => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(status) => panic!("call {n}: {status:?}"),
            }
        };
        assert_eq!(
            (reply.message, reply.provider.as_str()),
            (format!("Hello {name}"), expected.as_str())
        );
    }
    let metrics = consumer.metrics().encode();
    assert!(
        metrics.contains("rpc_registry_entries_skipped_total{registry=\"main\"} 3"),
        "{}",
        metrics
            .lines()
            .filter(|line| line.contains("skipped"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    consumer.before_shutdown().await;
    drop(zk);
    tokio::task::spawn_blocking(move || drop(dubbo_provider.stdin.take()))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_group_choose_the_provider_and_travel_as_triple_headers() {
    let Some((root, _python)) = DubboRoot::new("version_and_group_choose_the_provider") else {
        return;
    };
    let blue_1 = provider(&root, "1.0.0", "blue").await;
    let blue_2 = provider(&root, "2.0.0", "blue").await;
    let red_1 = provider(&root, "1.0.0", "red").await;
    for (version, group, expected) in [
        ("1.0.0", "blue", &blue_1),
        ("2.0.0", "blue", &blue_2),
        ("1.0.0", "red", &red_1),
    ] {
        let (consumer, mut client) = consumer(&root, version, group).await;
        let expected = expected.local_addr().unwrap().to_string();
        let mut answered = Vec::new();
        while answered.len() < 20 {
            match client
                .say_hello(HelloRequest {
                    name: "v".into(),
                    count: 0,
                })
                .await
            {
                Ok(reply) => answered.push(reply.into_inner().provider),
                Err(status) if answered.is_empty() && status.code() == tonic::Code::Unavailable => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(status) => panic!("{version}/{group}: {status:?}"),
            }
        }
        assert!(
            answered.iter().all(|provider| *provider == expected),
            "{version}/{group}: {answered:?}"
        );
        consumer.before_shutdown().await;
    }

    // A Triple call that asks another version of the service is not served by it.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", blue_1.local_addr().unwrap()))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut plain = GreeterClient::new(channel);
    let mut request = tonic::Request::new(HelloRequest {
        name: "x".into(),
        count: 0,
    });
    request
        .metadata_mut()
        .insert("tri-service-version", "9.9.9".parse().unwrap());
    let status = plain.say_hello(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");
    assert!(status.message().contains("version `9.9.9`"), "{status:?}");
    let plain_reply = plain
        .say_hello(HelloRequest {
            name: "x".into(),
            count: 0,
        })
        .await;
    assert!(
        plain_reply.is_ok(),
        "a plain gRPC call names no version: {plain_reply:?}"
    );
    for provider in [blue_1, blue_2, red_1] {
        assert_eq!(provider.before_shutdown().await.exit_code(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_our_providers_under_a_dubbo_consumers_load() {
    let Some((root, python)) = DubboRoot::new("a_rolling_restart_under_a_dubbo_consumer") else {
        return;
    };
    let mut providers = vec![provider(&root, "", "").await, provider(&root, "", "").await];
    let for_python = root.for_python();
    let (load, started) = tokio::task::spawn_blocking(move || {
        let mut consumer = PythonPeer::start(
            &python,
            &[
                "consume",
                proto::PROTO_DIR,
                &for_python,
                "1000000",
                "--until-stdin-closes",
                "--fixed-directory",
            ],
        );
        let started = consumer.line();
        (consumer, started)
    })
    .await
    .unwrap();
    assert_eq!(started, "started");

    // Each provider in turn: a new one starts and takes part of the load, then the old
    // one stops gracefully (unregister, wait for consumers, GOAWAY, drain).
    let mut reports = Vec::new();
    for round in 0..4 {
        let fresh = provider(&root, "", "").await;
        let took_calls = tokio::time::timeout(Duration::from_secs(20), async {
            while served(&fresh) < 50 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        if took_calls.is_err() {
            let last = tokio::task::spawn_blocking(move || load.finish())
                .await
                .unwrap();
            panic!(
                "round {round}: the new provider took no calls from the Dubbo consumer within 20 s; the consumer: {last}"
            );
        }
        let old = providers.remove(0);
        reports.push(old.before_shutdown().await);
        providers.push(fresh);
    }
    let last = tokio::task::spawn_blocking(move || load.finish())
        .await
        .unwrap();
    let tally = tally(&last);
    println!(
        "python consumer through 4 restarts: ok {} failed {} by provider {:?} errors {:?}",
        tally.ok, tally.failed, tally.providers, tally.errors
    );
    // Our side lost nothing: every stop clean, nothing refused, reset or left in flight.
    for report in &reports {
        println!("stop: {report}");
        assert_eq!(report.exit_code(), 0, "{report}");
        assert_eq!(
            (
                report.rejected,
                report.refused_streams,
                report.inbound_left,
                report.connections_forced
            ),
            (0, 0, 0, 0),
            "{report}"
        );
    }
    assert!(tally.ok > 200, "{tally:?}");
    // With the SDK's directory mended (dubbo_peer.py's `mend_directory`: as released it
    // drops calls at every registry notification, a provider joining as much as one
    // leaving — see the README's "Joining a Dubbo fleet"), the Dubbo consumer loses
    // nothing through the four restarts.
    assert_eq!(tally.failed, 0, "{tally:?}");
    for provider in providers {
        provider.before_shutdown().await;
    }
}
