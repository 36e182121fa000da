//! The connection against a real HTTP/2 server (h2's own, on loopback): dials shared,
//! what "not sent" means, GOAWAY and a new dial, flow control both ways, keep-alive.

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
}

/// An h2 server on `127.0.0.1:0`; its address and the connections it accepted.
async fn server(serve: Serve) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(connection(tcp, serve));
        }
    });
    (addr, accepted)
}

async fn connection(tcp: tokio::net::TcpStream, serve: Serve) {
    let Ok(mut connection) = h2::server::handshake(tcp).await else {
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
    let size = 3 * options::http2::CONNECTION_WINDOW as usize;
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
