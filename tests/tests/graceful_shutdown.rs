//! Graceful offline on real sockets: requests in flight are answered, a consumer that
//! keeps sending sees no failure, an idle provider leaves quickly, and peers that never
//! speak, never answer or never close cannot hold the exit, nor make it forced.

mod common;

use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::registry::MemoryHub;
use rpc::{Application, ReferenceChannel, Step};
use rpc_testkit::peers::StubbornPeers;
use tokio::time::Instant;

async fn consumer(hub: &MemoryHub, delay: Duration) -> (Application, EchoClient<ReferenceChannel>) {
    let mut builder = common::builder("consumer", hub, delay);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    (builder.start().await.expect("consumer starts"), client)
}

fn echo(delay_ms: u32) -> EchoRequest {
    EchoRequest {
        payload: bytes::Bytes::from_static(b"ping"),
        delay_ms: Some(delay_ms),
    }
}

/// (a) 50 requests of 1 s in flight on the provider being stopped, and a consumer that
/// keeps sending throughout: nothing fails, every in-flight request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_are_answered_and_new_ones_are_rerouted() {
    common::logs();
    let hub = MemoryHub::new();
    let leaving = common::echo_provider(&hub, 0, common::config("leaving")).await;
    let staying = common::echo_provider(&hub, 0, common::config("staying")).await;
    let leaving_addr = leaving.local_addr().unwrap().to_string();
    // The consumer hears of registry changes 300 ms late, like a real registry.
    let (consumer, client) = consumer(&hub, Duration::from_millis(300)).await;

    let long_calls: Vec<_> = (0..50)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move {
                client
                    .echo(echo(1_000))
                    .await
                    .map(|r| r.into_inner().provider)
            })
        })
        .collect();
    // Wait until the leaving provider is actually serving some of them.
    let deadline = Instant::now() + Duration::from_secs(5);
    while leaving.lifecycle().inbound().current() == 0 {
        assert!(
            Instant::now() < deadline,
            "no long call reached the leaving provider"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let in_flight_on_leaving = leaving.lifecycle().inbound().current();

    let shutdown = tokio::spawn(leaving.before_shutdown());
    // Keep sending short calls while it shuts down: 400 calls over about 2 s.
    let mut short_calls = Vec::new();
    for _ in 0..400 {
        let mut client = client.clone();
        short_calls.push(tokio::spawn(async move {
            client.echo(echo(0)).await.map(|r| r.into_inner().provider)
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let mut answered_by_leaving = 0;
    for call in long_calls {
        let provider = call
            .await
            .unwrap()
            .expect("every in-flight request is answered");
        answered_by_leaving += usize::from(provider == leaving_addr);
    }
    for call in short_calls {
        call.await.unwrap().expect("no new request fails");
    }
    let report = shutdown.await.unwrap();
    println!("in flight on the leaving provider: {in_flight_on_leaving}; report: {report}");
    assert!(answered_by_leaving >= in_flight_on_leaving);
    assert_eq!(report.inbound_left, 0);
    assert_eq!(report.connections_forced, 0);
    assert_eq!(report.exit_code(), 0);
    let stats = consumer.references()[0].stats();
    println!("consumer: {stats:?}");
    assert!(
        stats.blacklist.closing_marks >= 1,
        "the consumer saw the closing mark"
    );

    consumer.before_shutdown().await;
    staying.before_shutdown().await;
}

/// (b) An idle provider is gone one offline window after the trigger: no fixed sleep.
#[tokio::test]
async fn an_idle_provider_leaves_after_one_offline_window() {
    let hub = MemoryHub::new();
    let provider = common::echo_provider(&hub, 0, common::config("idle")).await;
    let window = provider.lifecycle().config().offline_request_window_timeout;
    let started = Instant::now();
    let report = provider.before_shutdown().await;
    let elapsed = started.elapsed();
    println!(
        "idle provider: trigger to exit {} ms (offline window {} ms): {report}",
        elapsed.as_millis(),
        window.as_millis()
    );
    // The tight figure (≤ window + 0.2 s) belongs to the benchmark; this bound only
    // catches a fixed sleep such as the 3 s consumer_update_wait_time.
    assert!(
        elapsed < window + Duration::from_millis(1_500),
        "{elapsed:?}"
    );
    assert!(report.step(Step::WaitForConsumers).unwrap().duration >= window);
    assert_eq!(report.exit_code(), 0);
}

/// (c) A client that opened a TCP connection and never sent the HTTP/2 preface is
/// closed by us at once; it delays nothing.
#[tokio::test]
async fn a_silent_connection_does_not_delay_exit() {
    let hub = MemoryHub::new();
    let provider = common::echo_provider(&hub, 0, common::config("provider")).await;
    let _silent = tokio::net::TcpStream::connect(provider.local_addr().unwrap())
        .await
        .unwrap();
    let server = provider.lifecycle().servers()[0].clone();
    tokio::time::timeout(Duration::from_secs(10), async {
        while server.open_connections() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the server sees the client's connection");
    let window = provider.lifecycle().config().offline_request_window_timeout;
    let started = Instant::now();
    let report = provider.before_shutdown().await;
    println!(
        "with a silent connection: {} ms: {report}",
        started.elapsed().as_millis()
    );
    assert!(started.elapsed() < window + Duration::from_millis(1_500));
    assert_eq!(report.connections_forced, 0);
    assert_eq!(report.exit_code(), 0);
}

/// (c') Peers that never finish the GOAWAY exchange hold nothing (issue 12, rule 1): a
/// client that sent the preface but never answers the GOAWAY's PING, one that answers
/// it but ignores the GOAWAY and keeps its socket open, a half-closed socket, one that
/// never spoke, and an idle tonic client. With nothing in flight, the provider closes
/// what its peers do not; that loses nothing, so the stop is clean (exit 0) and step 6
/// ends long before its bound (10 s here, so that waiting on a peer would show).
#[tokio::test]
async fn peers_that_never_finish_the_goaway_exchange_hold_nothing() {
    let hub = MemoryHub::new();
    let mut config = common::config("provider");
    config.graceful_shutdown.step_timeout = Duration::from_secs(10);
    let provider = common::echo_provider(&hub, 0, config).await;
    let peers = StubbornPeers::connect(provider.local_addr().unwrap()).await;
    let server = provider.lifecycle().servers()[0].clone();
    tokio::time::timeout(Duration::from_secs(10), async {
        // The half-closed connection may have ended already.
        while server.open_connections() < StubbornPeers::CONNECTIONS - 1 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the server sees every connection");
    let started = Instant::now();
    let report = provider.before_shutdown().await;
    println!(
        "with five peers that never finish the GOAWAY exchange: {} ms: {report}",
        started.elapsed().as_millis()
    );
    assert_eq!(report.connections_forced, 0, "{report}");
    assert_eq!(
        report.exit_code(),
        0,
        "closing an idle connection loses nothing"
    );
    let destroy = report.step(Step::DestroyProtocols).unwrap();
    assert_eq!(destroy.outcome, rpc::StepOutcome::Completed, "{report}");
    assert!(
        report.connections_idle >= 1,
        "the mute peer was closed idle: {report}"
    );
    assert_eq!(server.open_connections(), 0);
    drop(peers);
}
