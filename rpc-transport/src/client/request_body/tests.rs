//! How much of a request body is taken before the peer has room for it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::StreamBody;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::client::options::http2::MAX_SEND_BUFFER;
use crate::client::{ChannelOptions, connect_lazy};

/// Every test ends within this, whatever the code under test does.
const BOUND: Duration = Duration::from_secs(20);

const CHUNK: usize = 64 * 1024;
const CHUNKS: usize = 100;

/// A server on loopback that hands the first request of its first connection to
/// `serve` (the connection goes on accepting meanwhile); its address, and what `serve`
/// returns.
async fn one_request_server<F, T>(
    serve: impl FnOnce(Request<h2::RecvStream>, h2::server::SendResponse<Bytes>) -> F + Send + 'static,
) -> (String, tokio::task::JoinHandle<T>)
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let served = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut connection = h2::server::handshake(tcp).await.unwrap();
        let (request, respond) = connection.accept().await.unwrap().unwrap();
        tokio::spawn(async move { while connection.accept().await.is_some() {} });
        serve(request, respond).await
    });
    (addr, served)
}

/// Sends `body` as one request to `addr` and drops the response once its headers came.
async fn call_and_drop_the_response<B>(addr: &str, body: B)
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<rpc_core::BoxError>,
{
    let connection = connect_lazy(addr, &ChannelOptions::default()).unwrap();
    let request = Request::post("/t.S/M").body(body).unwrap();
    let response = tokio::time::timeout(BOUND, connection.oneshot(request))
        .await
        .unwrap()
        .unwrap();
    drop(response);
}

/// A server that reads one request's body a chunk at a time and, before it returns
/// each chunk's window, notes how many bytes the client has taken from its body beyond
/// what arrived; the most it saw, and the bytes that arrived.
async fn checking_server(
    taken: Arc<AtomicUsize>,
) -> (String, tokio::task::JoinHandle<(usize, usize)>) {
    one_request_server(move |request, mut respond| async move {
        let mut body = request.into_body();
        let (mut arrived, mut most_ahead) = (0, 0);
        while let Some(Ok(data)) = body.data().await {
            arrived += data.len();
            let ahead = (taken.load(Ordering::SeqCst) * CHUNK).saturating_sub(arrived);
            most_ahead = most_ahead.max(ahead);
            let _ = body.flow_control().release_capacity(data.len());
        }
        let mut stream = respond.send_response(Response::new(()), false).unwrap();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        stream.send_trailers(trailers).unwrap();
        (most_ahead, arrived)
    })
    .await
}

#[tokio::test]
async fn a_client_stream_whose_messages_are_all_ready_waits_for_the_peers_window() {
    let taken = Arc::new(AtomicUsize::new(0));
    let (addr, served) = checking_server(taken.clone()).await;
    // Every chunk is ready the moment it is asked for (as a client stream of an
    // iterator): each one counted when the sender takes it.
    let counted = taken.clone();
    let chunks = futures_util::stream::iter((0..CHUNKS).map(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from(vec![1u8; CHUNK])))
    }));
    call_and_drop_the_response(&addr, StreamBody::new(chunks)).await;
    let (most_ahead, arrived) = tokio::time::timeout(BOUND, served).await.unwrap().unwrap();
    assert_eq!(arrived, CHUNKS * CHUNK, "the whole body arrives");
    // Taken ahead of the peer: one stream's send buffer written at once, what h2 has
    // in flight within the peer's 64 KiB window, and the frame the sender holds while it
    // waits for room — not the whole body (6.4 MB).
    let bound = MAX_SEND_BUFFER + 2 * CHUNK + 65_535;
    assert!(
        most_ahead <= bound,
        "{most_ahead} bytes were taken from the body ahead of the peer (at most {bound})"
    );
}

/// A caller that drops its response while its request stream is still being sent
/// cancels the stream: the peer sees it reset (CANCEL), not a body that stops
/// mid-way and stays open.
#[tokio::test]
async fn dropping_the_response_resets_a_request_stream_still_being_sent() {
    let (addr, served) = one_request_server(|request, mut respond| async move {
        // Headers first, so that the client's call returns its response.
        let _stream = respond.send_response(Response::new(()), false).unwrap();
        let mut body = request.into_body();
        let first = body.data().await.unwrap().unwrap();
        let _ = body.flow_control().release_capacity(first.len());
        body.data().await.map(|next| next.map_err(|e| e.reason()))
    })
    .await;
    // One message, then a stream that never sends its next one nor ends.
    let frames = futures_util::stream::iter([Ok::<_, std::io::Error>(http_body::Frame::data(
        Bytes::from_static(b"first"),
    ))])
    .chain(futures_util::stream::pending());
    call_and_drop_the_response(&addr, StreamBody::new(frames)).await;
    let next = tokio::time::timeout(BOUND, served).await.unwrap().unwrap();
    assert_eq!(next, Some(Err(Some(h2::Reason::CANCEL))));
}
