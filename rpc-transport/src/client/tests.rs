//! The connection against a real HTTP/2 server (h2's own, on loopback): dials shared,
//! what "not sent" means, GOAWAY and a new dial, flow control both ways, keep-alive.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use tokio::net::TcpListener;
use tower::ServiceExt;

use super::*;

/// Every test ends within this, whatever the code under test does.
const BOUND: Duration = Duration::from_secs(20);

/// What the test server does with each request.
#[derive(Clone, Copy)]
enum Serve {
    /// Answers with the request's body (read to its end), then trailers.
    Echo,
    /// Answers `bytes` zeroes, without reading the request.
    Send(usize),
    /// Answers one request, then sends GOAWAY and closes when idle.
    OnceThenGoAway,
    /// Takes each request and never answers it (a slow handler; the connection lives).
    Hold,
}

/// An h2 server on `127.0.0.1:0`; its address and the connections it accepted.
async fn server(serve: Serve) -> (String, Arc<AtomicUsize>) {
    server_with(serve, None).await
}

/// As [`server`], allowing `max_streams` streams per connection.
async fn server_with(serve: Serve, max_streams: Option<u32>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(connection(tcp, serve, max_streams));
        }
    });
    (addr, accepted)
}

async fn connection(tcp: tokio::net::TcpStream, serve: Serve, max_streams: Option<u32>) {
    let mut builder = h2::server::Builder::new();
    if let Some(max) = max_streams {
        builder.max_concurrent_streams(max);
    }
    let Ok(mut connection) = builder.handshake(tcp).await else {
        return;
    };
    while let Some(Ok((request, respond))) = connection.accept().await {
        tokio::spawn(answer(request, respond, serve));
        if let Serve::OnceThenGoAway = serve {
            connection.graceful_shutdown();
        }
    }
}

async fn answer(
    request: Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    serve: Serve,
) {
    if let Serve::Hold = serve {
        let _held = (request, respond);
        return std::future::pending().await;
    }
    let mut body = request.into_body();
    let mut stream = respond
        .send_response(Response::new(()), false)
        .expect("a response");
    match serve {
        Serve::Echo | Serve::OnceThenGoAway => {
            while let Some(Ok(data)) = body.data().await {
                let _ = body.flow_control().release_capacity(data.len());
                stream.send_data(data, false).unwrap();
            }
        }
        Serve::Send(bytes) => stream
            .send_data(Bytes::from(vec![0; bytes]), false)
            .unwrap(),
        Serve::Hold => unreachable!("held above"),
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let _ = stream.send_trailers(trailers);
}

fn request(body: &'static [u8]) -> Request<Full<Bytes>> {
    Request::post("/t.S/M")
        .body(Full::new(Bytes::from_static(body)))
        .unwrap()
}

/// The response body's data and its `grpc-status` trailer.
async fn read(response: Response<ResponseBody>) -> (Vec<u8>, Option<String>) {
    let collected = response.into_body().collect().await.expect("the body");
    let status = collected
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .map(|v| v.to_str().unwrap().to_owned());
    (collected.to_bytes().to_vec(), status)
}

fn is_not_sent(error: &BoxError) -> bool {
    error.downcast_ref::<NotSent>().is_some()
}

#[tokio::test]
async fn a_call_is_sent_and_answered_with_its_trailers() {
    let (addr, _) = server(Serve::Echo).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    assert!(
        !connection.is_open(),
        "nothing is dialled before the first call"
    );
    let response = tokio::time::timeout(BOUND, connection.clone().oneshot(request(b"ping")))
        .await
        .unwrap()
        .expect("answered");
    assert_eq!(
        read(response).await,
        (b"ping".to_vec(), Some("0".to_owned()))
    );
    assert!(connection.is_open());
}

#[tokio::test]
async fn concurrent_first_calls_share_one_connection() {
    let (addr, accepted) = server(Serve::Echo).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    let calls: Vec<_> = (0..16)
        .map(|_| tokio::spawn(connection.clone().oneshot(request(b"x"))))
        .collect();
    for call in calls {
        let response = tokio::time::timeout(BOUND, call).await.unwrap().unwrap();
        assert_eq!(
            read(response.expect("answered")).await.1.as_deref(),
            Some("0")
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one dial for all 16");
}

#[tokio::test]
async fn calls_take_the_connections_of_an_instance_in_turn() {
    let (addr, accepted) = server(Serve::Echo).await;
    let options = ChannelOptions {
        connections_per_instance: 3,
        ..ChannelOptions::default()
    };
    let connection = connect_lazy(&addr, &options).unwrap();
    for round in 1..=2 {
        for _ in 0..3 {
            let call = connection.clone().oneshot(request(b"x"));
            let response = tokio::time::timeout(BOUND, call).await.unwrap().unwrap();
            assert_eq!(read(response).await.1.as_deref(), Some("0"));
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            3,
            "round {round}: one dial each"
        );
    }
}

#[tokio::test]
async fn a_refused_dial_is_not_sent_and_names_the_instance() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    let error = tokio::time::timeout(BOUND, connection.oneshot(request(b"x")))
        .await
        .unwrap()
        .expect_err("nothing listens");
    assert!(is_not_sent(&error), "{error}");
    assert!(error.to_string().contains(&addr), "{error}");
    let io = error.source().and_then(|e| e.downcast_ref::<io::Error>());
    assert_eq!(
        io.map(io::Error::kind),
        Some(io::ErrorKind::ConnectionRefused)
    );
}

#[tokio::test]
async fn after_a_goaway_the_next_call_dials_again_and_none_is_lost() {
    let (addr, accepted) = server(Serve::OnceThenGoAway).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    let mut answered = 0;
    for _ in 0..4 {
        // Each connection answers one call; a call that meets the GOAWAY is not sent,
        // and is sent again as the cluster layer does.
        for _ in 0..3 {
            match tokio::time::timeout(BOUND, connection.clone().oneshot(request(b"x")))
                .await
                .unwrap()
            {
                Ok(response) => {
                    assert_eq!(read(response).await.1.as_deref(), Some("0"));
                    answered += 1;
                    break;
                }
                Err(error) => assert!(is_not_sent(&error), "only ever not sent: {error}"),
            }
        }
    }
    assert_eq!(answered, 4);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        4,
        "one connection per call"
    );
}

#[tokio::test]
async fn a_response_larger_than_the_windows_arrives_whole() {
    // Three stream windows, and more than hyper's 5 MiB connection window.
    let size = 3 * options::DEFAULT_CLIENT_STREAM_WINDOW_SIZE as usize;
    let (addr, _) = server(Serve::Send(size)).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    let response = tokio::time::timeout(BOUND, connection.oneshot(request(b"")))
        .await
        .unwrap()
        .unwrap();
    let (data, status) = tokio::time::timeout(BOUND, read(response)).await.unwrap();
    assert_eq!((data.len(), status.as_deref()), (size, Some("0")));
}

#[tokio::test]
async fn a_streaming_request_larger_than_the_window_is_sent_whole() {
    let (addr, _) = server(Serve::Echo).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    // 48 chunks of 128 KiB (6 MiB, three stream windows), produced as they are asked for.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, io::Error>>(1);
    tokio::spawn(async move {
        for _ in 0..48 {
            let chunk = Bytes::from(vec![1u8; 128 * 1024]);
            if tx.send(Ok(http_body::Frame::data(chunk))).await.is_err() {
                return;
            }
        }
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    let body = StreamBody::new(Box::pin(chunks));
    let request = Request::post("/t.S/M").body(body).unwrap();
    let response = tokio::time::timeout(BOUND, connection.oneshot(request))
        .await
        .unwrap()
        .unwrap();
    let (data, status) = tokio::time::timeout(BOUND, read(response)).await.unwrap();
    assert_eq!(
        (data.len(), status.as_deref()),
        (48 * 128 * 1024, Some("0"))
    );
}

#[tokio::test]
async fn an_unanswered_keepalive_ends_the_calls_on_its_connection() {
    // A peer that accepts the TCP connection and then says nothing: a vanished host.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(tcp);
    });
    let options = ChannelOptions {
        http2_keepalive_interval: Some(Duration::from_millis(100)),
        http2_keepalive_timeout: Duration::from_millis(200),
        ..ChannelOptions::default()
    };
    // Pinged while the call is open: nothing is ever heard.
    let connection = connect_lazy(&addr, &options).unwrap();
    let result = tokio::time::timeout(BOUND, connection.clone().oneshot(request(b"x")))
        .await
        .expect("the keep-alive ends the call, not the test's bound");
    let error = result.expect_err("no answer can come");
    assert!(!is_not_sent(&error), "the request was sent: {error}");
    assert!(!connection.is_open(), "the connection is forgotten");
    held.abort();
}

#[test]
fn an_address_without_a_port_is_refused_at_once() {
    let error = connect_lazy("example", &ChannelOptions::default()).unwrap_err();
    assert!(error.to_string().contains("example"), "{error}");
}

/// A peer that accepts TCP connections and never says anything: a paused process.
async fn mute_peer() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut sockets = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            sockets.push(tcp);
        }
    });
    (addr, held)
}

#[tokio::test]
async fn a_call_over_the_stream_limit_waits_unsent_and_goes_once_a_stream_ends() {
    let (addr, _) = server_with(Serve::Echo, Some(2)).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    // Two calls hold the connection's two streams: their request bodies stay open.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, io::Error>>(1);
        let body = StreamBody::new(Box::pin(futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|chunk| (chunk, rx)) },
        )));
        let response = tokio::time::timeout(
            BOUND,
            connection
                .clone()
                .oneshot(Request::post("/t.S/M").body(body).unwrap()),
        )
        .await
        .unwrap()
        .unwrap();
        holders.push((tx, response));
    }
    // The peer's SETTINGS said 2: a third call waits for a permit, its stream unopened.
    let report = SendReport::default();
    {
        let third = connection.send(request(b"x"), &report);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), third)
                .await
                .is_err(),
            "the third call waits while two streams are open"
        );
    }
    assert!(
        !report.stream_opened(),
        "given up while waiting: certainly not sent"
    );
    // One holder ends its stream: a waiting call goes.
    let report = SendReport::default();
    let third = connection.send(request(b"y"), &report);
    tokio::pin!(third);
    assert!(futures_util::poll!(third.as_mut()).is_pending());
    let (tx, response) = holders.pop().unwrap();
    drop(tx);
    assert_eq!(read(response).await.1.as_deref(), Some("0"));
    let answered = tokio::time::timeout(BOUND, third).await.unwrap().unwrap();
    assert!(report.stream_opened());
    assert_eq!(read(answered).await, (b"y".to_vec(), Some("0".to_owned())));
}

#[tokio::test]
async fn a_probe_of_a_live_peer_says_alive_while_its_call_waits() {
    let (addr, _) = server(Serve::Hold).await;
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    let report = SendReport::default();
    let call = connection.send(request(b"x"), &report);
    tokio::pin!(call);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), call.as_mut())
            .await
            .is_err(),
        "held"
    );
    assert!(report.stream_opened());
    let liveness = tokio::time::timeout(BOUND, report.probe()).await.unwrap();
    assert_eq!(liveness, Some(Liveness::Alive));
    assert!(connection.is_open(), "a live connection stays");
}

#[tokio::test]
async fn a_probe_of_a_mute_peer_closes_the_connection_and_ends_its_calls() {
    let (addr, held) = mute_peer().await;
    let options = ChannelOptions {
        probe_timeout: Duration::from_millis(200),
        ..ChannelOptions::default()
    };
    let connection = connect_lazy(&addr, &options).unwrap();
    let report = SendReport::default();
    let call = connection.send(request(b"x"), &report);
    tokio::pin!(call);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), call.as_mut())
            .await
            .is_err()
    );
    let liveness = tokio::time::timeout(BOUND, report.probe()).await.unwrap();
    assert_eq!(liveness, Some(Liveness::Unresponsive));
    let error = tokio::time::timeout(BOUND, call)
        .await
        .expect("the call ends with its connection")
        .expect_err("no answer can come");
    assert!(report.stream_opened(), "it was sent: it may have run");
    assert!(!is_not_sent(&error), "{error}");
    assert!(!connection.is_open(), "the connection is forgotten");
    held.abort();
}

#[tokio::test]
async fn a_request_that_found_no_connection_has_nothing_to_probe() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let connection = connect_lazy(&addr, &ChannelOptions::default()).unwrap();
    let report = SendReport::default();
    let error = connection.send(request(b"x"), &report).await.unwrap_err();
    assert!(is_not_sent(&error));
    assert!(!report.stream_opened());
    assert_eq!(report.probe().await, None);
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_to_a_mute_peer_is_closed_by_its_idle_keepalive() {
    let (addr, held) = mute_peer().await;
    let options = ChannelOptions {
        http2_idle_keepalive_interval: Some(Duration::from_secs(60)),
        ..ChannelOptions::default()
    };
    let connection = connect_lazy(&addr, &options).unwrap();
    // A call opens the connection and is dropped: the connection is idle.
    let report = SendReport::default();
    {
        let call = connection.send(request(b"x"), &report);
        let _ = tokio::time::timeout(Duration::from_millis(10), call).await;
    }
    assert!(connection.is_open());
    // Nothing heard for the idle interval: a PING, unanswered within the timeout.
    tokio::time::sleep(Duration::from_secs(60 + 60 + 10 + 1)).await;
    assert!(!connection.is_open(), "closed by the idle keep-alive");
    held.abort();
}

#[tokio::test]
async fn streams_whose_readers_paused_do_not_stall_the_other_calls_of_the_connection() {
    // Each answer is larger than a stream window: the peer sends until the window is
    // full and waits for a reader who never comes.
    let size = 2 * options::DEFAULT_CLIENT_STREAM_WINDOW_SIZE as usize;
    let (paused_addr, _) = server(Serve::Send(size)).await;
    let connection = connect_lazy(&paused_addr, &ChannelOptions::default()).unwrap();
    let mut paused = Vec::new();
    for _ in 0..4 {
        let response = tokio::time::timeout(BOUND, connection.clone().oneshot(request(b"")))
            .await
            .unwrap()
            .unwrap();
        // Read nothing: the stream window (2 MiB) fills and stays full.
        paused.push(response);
    }
    // Four full stream windows (8 MiB) exceed hyper's 5 MiB connection window: with it,
    // the next answer could not get a byte through.
    let next = tokio::time::timeout(BOUND, connection.clone().oneshot(request(b"")))
        .await
        .expect("answered while four readers are paused")
        .unwrap();
    let (data, status) = tokio::time::timeout(BOUND, read(next))
        .await
        .expect("read to its end while four readers are paused");
    assert_eq!((data.len(), status.as_deref()), (size, Some("0")));
    drop(paused);
}
