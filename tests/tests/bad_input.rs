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
//! | `content-type: text/plain` (not gRPC)   | HTTP 415           | gRPC over HTTP/2 ("SHOULD respond with HTTP status of 415") |

mod common;

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use proto::interop::SimpleRequest;
use proto::interop::test_service_client::TestServiceClient;
use rpc::registry::MemoryHub;
use rpc_testkit::interop::server;
use rpc_testkit::interop::service::Method;
use rpc_testkit::wire::grpc::{self, framed};
use tokio::time::timeout;
use tonic::Code;

const BOUND: Duration = Duration::from_secs(20);
const UNARY: &str = "/grpc.testing.TestService/UnaryCall";

fn unary_request() -> Vec<u8> {
    SimpleRequest {
        response_size: 1,
        ..Default::default()
    }
    .encode_to_vec()
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
        let code = timeout(BOUND, grpc::call(addr, UNARY, &headers, body))
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {BOUND:?}"))
            .unwrap_or_else(|error| panic!("{what}: {error}"));
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
    // Not gRPC at all: HTTP 415, so that no plain HTTP client reads a refusal as 200 OK;
    // the handler does not run.
    let before = service.calls().get(Method::Unary);
    let answer = timeout(
        BOUND,
        grpc::call(
            addr,
            UNARY,
            &[("content-type", "text/plain")],
            framed(false, &message, None),
        ),
    )
    .await
    .expect("an answer within the bound");
    assert_eq!(
        answer,
        Err("HTTP status 415 Unsupported Media Type".to_owned())
    );
    assert_eq!(service.calls().get(Method::Unary), before, "not run");

    consumer.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}
