//! The server's flow-control windows: a handler that does not read its upload holds
//! its stream's window, never the whole connection's (by default); with the windows
//! configured as tonic's (the connection's no larger than a stream's), it does.

mod support;

use bytes::Bytes;
use lossless_rpc_transport::{DEFAULT_STREAM_WINDOW_SIZE, Server, ServerOptions, TransportError};
use tokio::time::timeout;

use support::{BOUND, Handlers, h2_client, post, serve};

#[tokio::test]
async fn a_handler_that_does_not_read_its_upload_does_not_stall_the_connection() {
    let (handlers, mut entries) = Handlers::new();
    let (_server, addr) = serve(ServerOptions::default(), &handlers).await;
    timeout(BOUND, async {
        let (mut client, _driver) = h2_client(addr).await;
        // A client stream whose handler never reads: it takes its whole stream window,
        // which the server never gives back.
        let (_stalled_response, mut stalled) = client.send_request(post("/stall"), false).unwrap();
        assert_eq!(entries.recv().await.as_deref(), Some("/stall"));
        send(&mut stalled, DEFAULT_STREAM_WINDOW_SIZE as usize).await;

        // A unary call with a body on the same connection still goes through.
        let upload = 64 << 10;
        let (response, mut body) = client.send_request(post("/unary"), false).unwrap();
        send(&mut body, upload).await;
        body.send_data(Bytes::new(), true).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        let mut answer = response.into_body();
        let mut text = Vec::new();
        while let Some(chunk) = answer.data().await {
            text.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(String::from_utf8(text).unwrap(), upload.to_string());
    })
    .await
    .expect("the unary call is not held up by the stalled upload");
}

/// Sends `bytes` zeroes on `stream`, each chunk once the flow-control windows (the
/// stream's and the connection's) have room for it.
async fn send(stream: &mut h2::SendStream<Bytes>, bytes: usize) {
    let mut sent = 0;
    while sent < bytes {
        stream.reserve_capacity(bytes - sent);
        let granted = std::future::poll_fn(|cx| stream.poll_capacity(cx))
            .await
            .expect("the stream is open")
            .unwrap();
        stream
            .send_data(Bytes::from(vec![0; granted]), false)
            .unwrap();
        sent += granted;
    }
}

#[tokio::test]
async fn with_the_connection_window_of_one_stream_a_handler_that_does_not_read_stops_every_upload()
{
    let (handlers, mut entries) = Handlers::new();
    let mut options = ServerOptions::default();
    options.initial_connection_window_size = DEFAULT_STREAM_WINDOW_SIZE;
    let (_server, addr) = serve(options, &handlers).await;
    timeout(BOUND, async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut client, mut connection) = h2::client::handshake(tcp).await.unwrap();
        let mut ping_pong = connection.ping_pong().expect("taken once");
        let _driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let (_stalled_response, mut stalled) = client.send_request(post("/stall"), false).unwrap();
        assert_eq!(entries.recv().await.as_deref(), Some("/stall"));
        send(&mut stalled, DEFAULT_STREAM_WINDOW_SIZE as usize).await;

        let (_response, mut body) = client.send_request(post("/unary"), false).unwrap();
        body.reserve_capacity(1);
        // A PING's answer comes after every WINDOW_UPDATE the server sent before it.
        ping_pong.ping(h2::Ping::opaque()).await.unwrap();
        assert_eq!(
            body.capacity(),
            0,
            "the stalled upload holds the whole connection window"
        );
    })
    .await
    .expect("within the bound");
}

#[tokio::test]
async fn a_window_out_of_the_protocols_range_is_refused_when_binding() {
    let cases = [
        (
            u32::MAX,
            DEFAULT_STREAM_WINDOW_SIZE,
            "initial_stream_window_size",
        ),
        (0, DEFAULT_STREAM_WINDOW_SIZE, "initial_stream_window_size"),
        (
            DEFAULT_STREAM_WINDOW_SIZE,
            u32::MAX,
            "initial_connection_window_size",
        ),
        (2 << 20, 1 << 20, "initial_connection_window_size"),
    ];
    for (stream, connection, named) in cases {
        let mut options = ServerOptions::default();
        options.initial_stream_window_size = stream;
        options.initial_connection_window_size = connection;
        match Server::bind("127.0.0.1:0".parse().unwrap(), options).await {
            Err(TransportError::InvalidOption { option, .. }) => assert_eq!(option, named),
            Err(other) => panic!("{stream}/{connection}: {other}"),
            Ok(_) => panic!("{stream}/{connection} was accepted"),
        }
    }
}
