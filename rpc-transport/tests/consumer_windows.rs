//! The consumer's flow-control windows (`ChannelOptions::initial_stream_window_size`,
//! `initial_connection_window_size`) reach the wire: a provider that answers callers
//! who do not read gets exactly the windows configured, and more once they read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use lossless_rpc_transport::{ChannelOptions, TransportError, connect_lazy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::timeout;
use tower::ServiceExt;

/// Every wait on the real clock ends within this, whatever the code under test does.
const BOUND: Duration = Duration::from_secs(20);
/// Bytes each answer holds: more than both windows of the test.
const ANSWER: usize = 512 << 10;
const STREAM_WINDOW: u32 = 128 << 10;
const CONNECTION_WINDOW: u32 = 192 << 10;

/// Bytes the provider has sent on each stream, in the order the streams came.
type SentPerStream = Arc<Mutex<Vec<watch::Receiver<usize>>>>;

/// A raw h2 provider on `127.0.0.1:0` that answers every request with `ANSWER` bytes,
/// sending each byte as soon as flow control lets it; its address and what it sent.
async fn provider() -> (String, SentPerStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let sent: SentPerStream = Arc::default();
    let streams = sent.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut connection = h2::server::handshake(tcp).await.unwrap();
        while let Some(Ok((_request, mut respond))) = connection.accept().await {
            let (count, counted) = watch::channel(0);
            streams.lock().unwrap().push(counted);
            let stream = respond.send_response(Response::new(()), false).unwrap();
            tokio::spawn(answer(stream, count));
        }
    });
    (addr, sent)
}

/// Sends `ANSWER` bytes as capacity comes, counting them on `count`, then trailers.
async fn answer(mut stream: h2::SendStream<Bytes>, count: watch::Sender<usize>) {
    let mut total = 0;
    stream.reserve_capacity(ANSWER);
    while total < ANSWER {
        let Some(Ok(granted)) = std::future::poll_fn(|cx| stream.poll_capacity(cx)).await else {
            return;
        };
        let n = granted.min(ANSWER - total);
        stream.send_data(Bytes::from(vec![0; n]), false).unwrap();
        total += n;
        count.send_replace(total);
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let _ = stream.send_trailers(trailers);
}

/// The provider's count of the `index`th stream, once it has come.
async fn stream_sent(sent: &SentPerStream, index: usize) -> watch::Receiver<usize> {
    loop {
        if let Some(count) = sent.lock().unwrap().get(index) {
            return count.clone();
        }
        tokio::task::yield_now().await;
    }
}

/// Waits until the count reaches `at_least`; the count then.
async fn reached(count: &mut watch::Receiver<usize>, at_least: usize) -> usize {
    *count.wait_for(|sent| *sent >= at_least).await.unwrap()
}

fn request() -> Request<Empty<Bytes>> {
    Request::post("/t.S/M").body(Empty::new()).unwrap()
}

#[tokio::test]
async fn a_provider_gets_the_configured_windows_and_more_once_callers_read() {
    let (addr, sent) = provider().await;
    let mut options = ChannelOptions::default();
    options.initial_stream_window_size = STREAM_WINDOW;
    options.initial_connection_window_size = CONNECTION_WINDOW;
    let connection = connect_lazy(&addr, &options).unwrap();
    timeout(BOUND, async {
        // A caller that does not read: its provider sends one stream window, no more.
        let first = connection.clone().oneshot(request()).await.unwrap();
        let mut first_sent = stream_sent(&sent, 0).await;
        let window = STREAM_WINDOW as usize;
        assert_eq!(reached(&mut first_sent, window).await, window);

        // A second such caller: the connection window has only its rest for it.
        let second = connection.clone().oneshot(request()).await.unwrap();
        let mut second_sent = stream_sent(&sent, 1).await;
        let rest = (CONNECTION_WINDOW - STREAM_WINDOW) as usize;
        assert_eq!(reached(&mut second_sent, rest).await, rest);

        // Once the first caller reads its answer, both answers arrive whole.
        let first = first.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(first.len(), ANSWER);
        let second = second.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(second.len(), ANSWER);
    })
    .await
    .expect("within the bound");
    // The provider's counts ended at the whole answers.
    assert_eq!(*stream_sent(&sent, 1).await.borrow(), ANSWER);
}

#[tokio::test]
async fn windows_out_of_range_are_refused_before_any_dial() {
    let mut options = ChannelOptions::default();
    options.initial_connection_window_size = 1 << 31;
    match connect_lazy("127.0.0.1:1", &options) {
        Err(TransportError::InvalidChannelOption { option, .. }) => {
            assert_eq!(option, "initial_connection_window_size");
        }
        other => panic!("expected InvalidChannelOption, got {:?}", other.err()),
    }
    options.initial_connection_window_size = 1 << 20;
    options.initial_stream_window_size = 2 << 20;
    let refused = connect_lazy("127.0.0.1:1", &options).err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("less than initial_stream_window_size"),
        "{refused}"
    );
}

#[test]
fn the_defaults_pass_the_check() {
    ChannelOptions::default().check().unwrap();
}
