//! The floor: the echo call sent over the `h2` crate's client directly, against tonic's
//! server. No tower `Buffer`, no hyper client dispatch, no task per request: the caller's
//! task opens the stream on a clone of `h2::client::SendRequest` (h2's client docs:
//! "SendRequest ... can be cloned to send requests concurrently"), and only the
//! connection future runs on a task of its own. What plain tonic costs above this is
//! what tonic's `Channel` and hyper's client add; it is the budget our own transport
//! (rpc-transport's `InstanceConnection`) is measured against.

use std::net::SocketAddr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use prost::Message;
use proto::echo::EchoReply;

use crate::BoxedCall;
use crate::stacks::request;

/// A client of the echo service at `addr` over one HTTP/2 connection (TCP_NODELAY),
/// its connection driven by a task of its own.
pub async fn plain_h2_client(addr: SocketAddr) -> SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the echo server");
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    let (send, connection) = h2::client::handshake(tcp)
        .await
        .expect("the HTTP/2 handshake");
    tokio::spawn(connection);
    send
}

/// Echo calls over `send`, one per invocation; a failed echo panics.
pub fn plain_h2_calls(send: SendRequest<Bytes>) -> impl Fn() -> BoxedCall + Clone + Send {
    move || -> BoxedCall {
        let send = send.clone();
        Box::pin(async move {
            // Encoded per call, as a stub does.
            let body = grpc_frame(&request());
            let reply = echo(send, body).await.expect("plain-h2 echo succeeds");
            assert_eq!(reply.payload.len(), 64, "the payload comes back");
        })
    }
}

async fn echo(send: SendRequest<Bytes>, body: Bytes) -> Result<EchoReply, String> {
    let mut send = send.ready().await.map_err(|e| e.to_string())?;
    let request = http::Request::post("http://echo/echo.Echo/Echo")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a valid request");
    let (response, mut stream) = send
        .send_request(request, false)
        .map_err(|e| e.to_string())?;
    stream.send_data(body, true).map_err(|e| e.to_string())?;
    let mut body = response.await.map_err(|e| e.to_string())?.into_body();
    let mut message = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let _ = body.flow_control().release_capacity(chunk.len());
        message.put(chunk);
    }
    let trailers = body.trailers().await.map_err(|e| e.to_string())?;
    match trailers.as_ref().and_then(|t| t.get("grpc-status")) {
        Some(status) if status == "0" => {}
        other => return Err(format!("grpc-status {other:?}")),
    }
    message.advance(5);
    EchoReply::decode(message.freeze()).map_err(|e| e.to_string())
}

/// `message` as one gRPC length-prefixed message (not compressed).
fn grpc_frame(message: &impl Message) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + message.encoded_len());
    frame.put_u8(0);
    frame.put_u32(message.encoded_len() as u32);
    message.encode(&mut frame).expect("room for the message");
    frame.freeze()
}
