//! A mixed fleet: our applications and real Dubbo peers — Apache Dubbo's Python SDK
//! (`apache-dubbo`: Triple over h2, ZooKeeper through kazoo, `tests/python/dubbo_peer.py`)
//! — in one ZooKeeper, each registry in Dubbo's layout (`format: dubbo`).
//!
//! Needs `RPC_TEST_ZOOKEEPER_URL` (`scripts/registries.sh`) and `RPC_TEST_PYTHON` with
//! `apache-dubbo` and `kazoo` (`scripts/test.sh` installs both into `.venv`); without
//! them, and not required, each test says it was skipped. Each test works under a ZooKeeper
//! root of its own (Dubbo's registry `group`), so tests side by side never see each other.

mod common;

use std::time::Duration;

use common::dubbo::{DubboRoot, PythonPeer, SERVICE, tally};
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::config::ServiceConfig;
use rpc::registry::dubbo::DubboUrl;
use rpc::{Application, Config};
use rpc_testkit::services::GreeterProvider;
use zookeeper_client::{Acls, CreateMode};

fn config(name: &str, root: &DubboRoot) -> Config {
    let mut config = common::config(name);
    config.registries = [("main".to_owned(), root.registry())].into();
    config
}

/// Our greeter provider, registered in Dubbo's layout (version and group as given).
async fn provider(root: &DubboRoot, version: &str, group: &str) -> Application {
    let mut config = config("rust-provider", root);
    let mut service = ServiceConfig::default();
    service.version = version.to_owned();
    service.group = group.to_owned();
    config.provider.services.insert(SERVICE.to_owned(), service);
    let mut builder = Application::builder(config);
    builder.service(GreeterServer::new(GreeterProvider));
    builder.file_descriptor_set(proto::FILE_DESCRIPTOR_SET);
    builder.start().await.expect("provider starts")
}

/// Our consumer of the greeter, through Dubbo's layout; started once a provider is
/// listed (`consumer.check`, Dubbo's default too), within 10 s.
async fn consumer(
    root: &DubboRoot,
    version: &str,
    group: &str,
) -> (Application, GreeterClient<rpc::ReferenceChannel>) {
    let mut config = config("rust-consumer", root);
    config.consumer.check = true;
    config.consumer.check_timeout = Duration::from_secs(10);
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
        let request = HelloRequest {
            name: name.clone(),
            count: 0,
        };
        let reply = match client.say_hello(request).await {
            Ok(reply) => reply.into_inner(),
            Err(status) => panic!("call {n}: {status:?}"),
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
            let request = HelloRequest {
                name: "v".into(),
                count: 0,
            };
            match client.say_hello(request).await {
                Ok(reply) => answered.push(reply.into_inner().provider),
                Err(status) => panic!("{version}/{group}: {status:?}"),
            }
        }
        assert!(
            answered.iter().all(|provider| *provider == expected),
            "{version}/{group}: {answered:?}"
        );
        consumer.before_shutdown().await;
    }

    // Patterns, as Dubbo matches them: any version and group reaches all three; one
    // version in either of two groups reaches two. Their calls name no version or group
    // (no single value is true of every provider taken), so each provider serves them.
    let address = |app: &Application| app.local_addr().unwrap().to_string();
    for (version, group, expected) in [
        (
            "*",
            "*",
            vec![address(&blue_1), address(&blue_2), address(&red_1)],
        ),
        ("1.0.0", "red,blue", vec![address(&blue_1), address(&red_1)]),
    ] {
        let (consumer, mut client) = consumer(&root, version, group).await;
        let mut answered = std::collections::BTreeSet::new();
        for _ in 0..60 {
            let request = HelloRequest {
                name: "p".into(),
                count: 0,
            };
            match client.say_hello(request).await {
                Ok(reply) => answered.insert(reply.into_inner().provider),
                Err(status) => panic!("{version}/{group}: {status:?}"),
            };
        }
        let expected: std::collections::BTreeSet<String> = expected.into_iter().collect();
        assert_eq!(answered, expected, "{version}/{group}");
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
    // leaving — see docs/dubbo.md, "Joining a Dubbo fleet"), the Dubbo consumer loses
    // nothing through the four restarts.
    assert_eq!(tally.failed, 0, "{tally:?}");
    for provider in providers {
        provider.before_shutdown().await;
    }
}

/// A Python Dubbo provider on `port`, registered under `root`, ready.
async fn python_provider(python: &str, root: &DubboRoot, port: u16) -> PythonPeer {
    let (python, for_python) = (python.to_owned(), root.for_python());
    tokio::task::spawn_blocking(move || {
        let port = port.to_string();
        let mut peer =
            PythonPeer::start(&python, &["provide", proto::PROTO_DIR, &for_python, &port]);
        assert_eq!(peer.line(), "ready");
        peer
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_consumer_rides_through_a_dubbo_providers_restart() {
    let Some((root, python)) = DubboRoot::new("our_consumer_through_a_dubbo_provider_restart")
    else {
        return;
    };
    let (a_port, b_port) = (free_port(), free_port());
    let a = python_provider(&python, &root, a_port).await;
    let _b = python_provider(&python, &root, b_port).await;
    let (consumer, client) = consumer(&root, "", "").await;
    let a_address = format!("127.0.0.1:{a_port}");

    // One call at a time, as long as the test runs: what each answered, what failed.
    let stop = tokio_util::sync::CancellationToken::new();
    let load = tokio::spawn({
        let (stop, mut client) = (stop.clone(), client.clone());
        async move {
            let (mut answered, mut failed) = (Vec::new(), Vec::new());
            let mut n = 0u64;
            while !stop.is_cancelled() {
                n += 1;
                let request = HelloRequest {
                    name: format!("n{n}"),
                    count: 0,
                };
                match client.say_hello(request).await {
                    Ok(reply) => answered.push(reply.into_inner().provider),
                    Err(status) => failed.push(status),
                }
            }
            (answered, failed)
        }
    });
    // A serves, then its process ends (its registration stays until its ZooKeeper
    // session expires: the consumer learns it from the refused dials), and it comes back
    // as a new process on a new port (as a restarted pod does), which serves.
    let answers = |address: String| {
        let mut probe = client.clone();
        async move {
            loop {
                let request = HelloRequest {
                    name: "probe".into(),
                    count: 0,
                };
                if let Ok(reply) = probe.say_hello(request).await
                    && reply.into_inner().provider == address
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), answers(a_address.clone()))
        .await
        .expect("A answers");
    tokio::task::spawn_blocking(move || drop(a)).await.unwrap();
    // Down for half a second, as a restart is.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again_port = free_port();
    let _a_again = python_provider(&python, &root, again_port).await;
    tokio::time::timeout(
        Duration::from_secs(20),
        answers(format!("127.0.0.1:{again_port}")),
    )
    .await
    .expect("the restarted A answers");
    stop.cancel();
    let (answered, failed) = load.await.unwrap();
    println!(
        "our consumer through a Dubbo provider's restart: {} answered ({} by A), {} failed: {failed:?}",
        answered.len(),
        answered.iter().filter(|by| **by == a_address).count(),
        failed.len()
    );
    // Killed, A drops at most the one call it was serving (calls go one at a time); every
    // call sent to it after that was refused at the dial and re-sent to B.
    assert!(failed.len() <= 1, "{failed:?}");
    assert!(answered.len() > 100, "{}", answered.len());
    consumer.before_shutdown().await;
}
