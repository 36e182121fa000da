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

/// (a) 50 requests of 2 s in flight on the two providers, one of which is stopped, and a
/// consumer that keeps sending throughout: nothing fails, every request in flight on the
/// stopping provider is answered by it. (2 s: long enough that all 50 are in flight at
/// once also on a loaded machine, short of the drain's 3 s bound.)
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
                    .echo(echo(2_000))
                    .await
                    .map(|r| r.into_inner().provider)
            })
        })
        .collect();
    // Wait until all 50 are being served, on one provider or the other: then the count
    // on the leaving one is every long call it will ever get (none of them ends for two
    // seconds), not the first few that happened to arrive.
    let serving =
        || leaving.lifecycle().inbound().current() + staying.lifecycle().inbound().current();
    let deadline = Instant::now() + Duration::from_secs(30);
    while serving() < 50 {
        assert!(
            Instant::now() < deadline,
            "the long calls did not all reach a provider: {} did",
            serving()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let in_flight_on_leaving = leaving.lifecycle().inbound().current();
    // P2C spreads them over both providers (about half each).
    assert!(
        in_flight_on_leaving >= 10,
        "only {in_flight_on_leaving} of 50 long calls are on the leaving provider"
    );

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
    // Each long call in flight on the leaving provider was answered by it, and no
    // other: a call already running is never moved.
    assert_eq!(answered_by_leaving, in_flight_on_leaving);
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
/// On tokio's paused clock, which moves only when every task waits on a timer, the
/// shutdown's duration is the sum of the waits it made: exactly the offline window
/// (the real figure, trigger to exit, is the `idle_shutdown` benchmark's).
#[tokio::test(start_paused = true)]
async fn an_idle_provider_leaves_after_one_offline_window() {
    let hub = MemoryHub::new();
    let provider = common::echo_provider(&hub, 0, common::config("idle")).await;
    let window = provider.lifecycle().config().offline_request_window_timeout;
    let started = Instant::now();
    let report = provider.before_shutdown().await;
    let elapsed = started.elapsed();
    println!("idle provider: {report}");
    assert_eq!(elapsed, window, "waited for nothing but the offline window");
    assert_eq!(
        report.step(Step::WaitForConsumers).unwrap().duration,
        window
    );
    assert_eq!(report.exit_code(), 0);
}

/// (b') The report counts the connection of a consumer that moved away by itself: the
/// consumer hears of the withdrawal at once (no registry delay), and, another provider
/// being left, closes its idle connection to this one during step 2, long before step
/// 6's GOAWAY. The tally used to start at step 3, so such a close, the usual end of a
/// consumer's connection, was counted nowhere (`connections closed=0 idle=0 forced=0` on
/// every restart of `rolling-deploy`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_counts_a_connection_its_consumer_closed_while_moving_away() {
    let hub = MemoryHub::new();
    let leaving = common::echo_provider(&hub, 0, common::config("leaving")).await;
    let staying = common::echo_provider(&hub, 0, common::config("staying")).await;
    let (consumer, client) = consumer(&hub, Duration::ZERO).await;
    let server = leaving.lifecycle().servers()[0].clone();
    // Calls until one went to the leaving provider (P2C: about every other one).
    for call in 0.. {
        assert!(
            call < 200,
            "200 calls and none reached the leaving provider"
        );
        client
            .clone()
            .echo(echo(0))
            .await
            .expect("the call is answered");
        if server.open_connections() == 1 {
            break;
        }
    }

    let report = leaving.before_shutdown().await;
    println!("after the consumer moved away: {report}");
    assert_eq!(
        report.connections_closed + report.connections_idle,
        1,
        "the consumer's connection is counted: {report}"
    );
    assert_eq!(report.connections_forced, 0, "{report}");
    consumer.before_shutdown().await;
    staying.before_shutdown().await;
}

/// (c) A client that opened a TCP connection and never sent the HTTP/2 preface is
/// closed by us; it delays nothing beyond the short wait for a peer that dialled just
/// before the stop (`PING_ANSWER_WAIT` in rpc-transport, 100 ms). Paused clock, as (b):
/// the exit's duration is the sum of the waits.
#[tokio::test(start_paused = true)]
async fn a_silent_connection_does_not_delay_exit() {
    let hub = MemoryHub::new();
    let provider = common::echo_provider(&hub, 0, common::config("provider")).await;
    let _silent = tokio::net::TcpStream::connect(provider.local_addr().unwrap())
        .await
        .unwrap();
    let server = provider.lifecycle().servers()[0].clone();
    // Busy until then, so the paused clock does not move; bounded by a count of turns.
    let mut turns = 0u32;
    while server.open_connections() == 0 {
        turns += 1;
        assert!(turns < 10_000_000, "the server never saw the connection");
        tokio::task::yield_now().await;
    }
    let window = provider.lifecycle().config().offline_request_window_timeout;
    let started = Instant::now();
    let report = provider.before_shutdown().await;
    let elapsed = started.elapsed();
    println!("with a silent connection: {report}");
    assert_eq!(
        elapsed,
        window + Duration::from_millis(100),
        "the offline window and the wait for a first byte, nothing else"
    );
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

/// (d) At a hot upgrade's hand-over, a connection whose client dialled this process but
/// has not called yet is served its first call, and only then gets its GOAWAY. Sent at
/// once, the GOAWAY reached such clients before their call (under CPU contention the
/// call came 6 to 340 ms after the hand-over), and tonic's channel fails a call it had
/// not sent yet on a connection that got GOAWAY ("h2 protocol error", GoAway NO_ERROR;
/// or "operation was canceled") instead of sending it on a new connection: the calls
/// `hot_upgrade`'s new-connection probe lost. Paused clock: the client calls 999 ms after
/// the hand-over, when everything the server does without a timer is long done.
#[tokio::test(start_paused = true)]
async fn a_connection_that_has_not_called_yet_at_a_hand_over_is_served_its_first_call() {
    use bytes::{BufMut, BytesMut};
    use prost::Message;

    let hub = MemoryHub::new();
    let provider = common::echo_provider(&hub, 0, common::config("old")).await;
    let addr = provider.local_addr().unwrap();
    let server = provider.lifecycle().servers()[0].clone();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut turns = 0u32;
    while server.open_connections() == 0 {
        turns += 1;
        assert!(turns < 10_000_000, "the server never saw the connection");
        tokio::task::yield_now().await;
    }

    // The hand-over, as the old process makes it: the successor accepts from now on,
    // and this process drains its connections.
    server.stop_accepting();
    let drain = tokio::spawn({
        let server = server.clone();
        async move {
            server
                .shutdown(Instant::now() + Duration::from_secs(10))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(999)).await;
    assert_eq!(
        server.connection_counts().goaway_sent,
        0,
        "no GOAWAY before the connection's first call"
    );

    let mut client = client.ready().await.expect("the connection is open");
    let request = http::Request::post(format!("http://{addr}/echo.Echo/Echo"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut body) = client.send_request(request, false).expect("a stream");
    let message = echo(0).encode_to_vec();
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.put_slice(&message);
    body.send_data(framed.freeze(), true).unwrap();
    let response = response.await.expect("the call is answered");
    assert_eq!(response.status(), http::StatusCode::OK);
    let mut reply = response.into_body();
    while let Some(data) = reply.data().await {
        data.expect("the reply's data");
    }
    let trailers = reply.trailers().await.unwrap().expect("trailers");
    assert_eq!(trailers["grpc-status"], "0", "{trailers:?}");

    let closed = drain.await.unwrap();
    assert_eq!(
        (closed.closed_gracefully, closed.forced),
        (1, 0),
        "{closed:?}"
    );
    assert_eq!(
        server.connection_counts().goaway_sent,
        1,
        "its GOAWAY followed the call"
    );
    provider.abort().await;
}
