//! Bad input on the wire to a provider, sent with a raw HTTP/2 client (no gRPC library
//! would send it): each request gets the status gRPC names for it, nothing panics, and
//! the provider keeps serving other calls.
//!
//! | input                                   | status             | where it is named                  |
//! |-----------------------------------------|--------------------|------------------------------------|
//! | malformed `grpc-timeout`                | `INTERNAL`         | grpc-go's server (the spec names none) |
//! | message compressed with unknown encoding| `UNIMPLEMENTED`    | gRPC compression spec              |
//! | message over `max_decoding_message_size`| `RESOURCE_EXHAUSTED` | gRPC status codes ("message too large") |
//! | body ends inside a message (truncated)  | `INTERNAL`         | gRPC status codes ("internal errors") |

mod common;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, Request};
use prost::Message;
use proto::interop::SimpleRequest;
use proto::interop::test_service_client::TestServiceClient;
use rpc::registry::MemoryHub;
use rpc_testkit::interop::server;
use rpc_testkit::interop::service::Method;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tonic::Code;

const BOUND: Duration = Duration::from_secs(20);

/// A gRPC message: flag, big-endian length, bytes; `declared` overrides the length.
fn framed(compressed: bool, message: &[u8], declared: Option<u32>) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.put_u8(u8::from(compressed));
    frame.put_u32(declared.unwrap_or(message.len() as u32));
    frame.put_slice(message);
    frame.freeze()
}

fn unary_request() -> Vec<u8> {
    SimpleRequest {
        response_size: 1,
        ..Default::default()
    }
    .encode_to_vec()
}

/// Sends one UnaryCall with `headers` and `body` on a fresh HTTP/2 connection and
/// returns the gRPC status code of the answer (from the headers of a trailers-only
/// answer, or from the trailers).
async fn raw_call(addr: std::net::SocketAddr, headers: &[(&str, &str)], body: Bytes) -> Code {
    let tcp = TcpStream::connect(addr).await.expect("connects");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let mut request = Request::post(format!("http://{addr}/grpc.testing.TestService/UnaryCall"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (response, mut send) = client
        .send_request(request.body(()).expect("request"), false)
        .expect("request sent");
    // A provider may answer (and close the stream) before it reads a request it refuses
    // from its headers alone: then the body has nowhere to go, and the answer is what
    // counts (it is asserted below).
    let _ = send.send_data(body, true);
    let response = response.await.expect("a response");
    assert_eq!(response.status(), http::StatusCode::OK);
    if let Some(code) = status_of(response.headers()) {
        return code;
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("data");
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body
        .trailers()
        .await
        .expect("trailers")
        .expect("some trailers");
    status_of(&trailers).expect("a grpc-status")
}

fn status_of(headers: &HeaderMap) -> Option<Code> {
    headers
        .get("grpc-status")
        .map(|value| Code::from_bytes(value.as_bytes()))
}

/// One bad request and the status it must get.
struct BadInput {
    what: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Bytes,
    want: Code,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_status_and_the_provider_keeps_serving() {
    common::logs();
    let hub = MemoryHub::new();
    let mut builder = common::builder("provider", &hub, Duration::ZERO);
    let service = server::provide(&mut builder);
    let provider = builder.start().await.expect("provider starts");
    let addr = provider.local_addr().expect("listens");
    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let mut good = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer = builder.start().await.expect("consumer starts");

    let message = unary_request();
    let cases = [
        BadInput {
            what: "malformed grpc-timeout",
            headers: vec![("grpc-timeout", "soon")],
            body: framed(false, &message, None),
            want: Code::Internal,
        },
        BadInput {
            what: "unknown compression",
            headers: vec![("grpc-encoding", "snappy")],
            body: framed(true, &message, None),
            want: Code::Unimplemented,
        },
        BadInput {
            what: "message over the 4 MiB limit",
            headers: vec![],
            body: framed(false, &vec![0u8; 5 << 20], None),
            want: Code::ResourceExhausted,
        },
        BadInput {
            what: "truncated message",
            headers: vec![],
            body: framed(false, &message[..1], Some(100)),
            want: Code::Internal,
        },
    ];
    for BadInput {
        what,
        headers,
        body,
        want,
    } in cases
    {
        let before = service.calls().get(Method::Unary);
        let code = timeout(BOUND, raw_call(addr, &headers, body))
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {BOUND:?}"));
        println!("{what}: {code:?}");
        assert_eq!(code, want, "{what}");
        if what == "malformed grpc-timeout" {
            assert_eq!(service.calls().get(Method::Unary), before, "not run");
        }
        // Another caller is served as before.
        let request = SimpleRequest {
            response_size: 5,
            ..Default::default()
        };
        let response = good
            .unary_call(request)
            .await
            .expect("a good call succeeds");
        assert_eq!(
            response.into_inner().payload.map(|p| p.body.len()),
            Some(5),
            "after {what}"
        );
    }
    consumer.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}
