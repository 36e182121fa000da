//! Issue 12, rule 5: bad input on the wire gets the answer the specifications name, and
//! hurts no one else. One provider (limits from `protocol:`), one good consumer calling
//! it at a steady rate throughout, and one attack after another on their own
//! connections:
//!
//! | input | answer | named by |
//! |---|---|---|
//! | bytes that are not HTTP/2 | connection closed (a GOAWAY, if any, says `PROTOCOL_ERROR`) | RFC 9113 §3.4 |
//! | frame over `SETTINGS_MAX_FRAME_SIZE` | GOAWAY `FRAME_SIZE_ERROR` | RFC 9113 §4.2 |
//! | PING of 7 bytes | GOAWAY `FRAME_SIZE_ERROR`; h2 sends `PROTOCOL_ERROR` | RFC 9113 §6.7 |
//! | DATA on stream 0 | GOAWAY `PROTOCOL_ERROR` | RFC 9113 §6.1 |
//! | header block that is not HPACK | GOAWAY `COMPRESSION_ERROR`; h2 sends `PROTOCOL_ERROR` | RFC 9113 §4.3 |
//! | request message over `max_decoding_message_size` (a lying 4 GiB prefix) | `RESOURCE_EXHAUSTED`, nothing buffered | gRPC status codes |
//! | response message over `max_encoding_message_size` | `RESOURCE_EXHAUSTED` | gRPC status codes |
//! | message that is not protobuf | `INTERNAL` | gRPC status codes ("internal errors"), as grpc-go answers |
//! | rapid-reset flood (CVE-2023-44487) | served, bounded by `max_concurrent_streams`, or GOAWAY `ENHANCE_YOUR_CALM` | RFC 9113 §5.4.1 |
//! | header list over `max_header_list_size` | HTTP 431 | RFC 9113 §10.5.1, RFC 6585 |
//! | CONTINUATION flood (CVE-2024-27316) | GOAWAY `ENHANCE_YOUR_CALM` | RFC 9113 §10.5 |
//!
//! (A malformed `grpc-timeout`, unknown compression and a truncated message are in
//! `bad_input.rs`.) Asserted: each answer, no panic anywhere in the process, resident
//! memory grows by less than [`MEMORY_BOUND`], every good call succeeds, and the
//! provider shuts down cleanly. How much the attacks slow the good client is a
//! wall-clock figure, not a claim a test can hold on a shared machine: the benchmark
//! `benches/benches/bad_input.rs` measures it (the good client's p99 during the attacks
//! over its p99 alone, in one run), and this test says nothing of it.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prost::Message;
use proto::interop::SimpleRequest;
use proto::interop::test_service_client::TestServiceClient;
use rpc::registry::MemoryHub;
use rpc_testkit::interop::server;
use rpc_testkit::load::{self, LoadOptions};
use rpc_testkit::wire::{self, FloodAnswer, Malformed, grpc};
use tokio::time::timeout;
use tonic::Code;

const BOUND: Duration = Duration::from_secs(10);
const UNARY: &str = "/grpc.testing.TestService/UnaryCall";
/// Growth of the process's resident memory the attacks may cause (the test process
/// holds provider and clients): well under one unbounded buffer of the 4 GiB a lying
/// prefix declares, and under what 20 000 leaked streams would hold.
const MEMORY_BOUND: u64 = 96 << 20;
const LIMIT: usize = 1 << 20;

/// Resident memory of this process, in bytes (Linux), 0 where unknown.
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Counts panics on every thread of the process, then lets the default hook print them.
fn count_panics() -> Arc<AtomicUsize> {
    let panics = Arc::new(AtomicUsize::new(0));
    let counter = panics.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        counter.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    panics
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_answered_as_the_specs_say_and_hurts_no_one_else() {
    common::logs();
    let panics = count_panics();
    let hub = MemoryHub::new();
    let mut config = common::config("provider");
    config.protocol.max_decoding_message_size = LIMIT;
    config.protocol.max_encoding_message_size = LIMIT;
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    server::provide(&mut builder);
    let provider = builder.start().await.expect("provider starts");
    let addr = provider.local_addr().expect("listens");
    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let good = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer = builder.start().await.expect("consumer starts");

    // The good client: 200 calls/s for 6 s (the attacks take about 1 s), in the
    // background.
    let (load_tx, load_rx) = tokio::sync::oneshot::channel();
    let caller = good.clone();
    let good_load = tokio::spawn(load::run(
        LoadOptions::new(200, Duration::from_secs(6)),
        move |_| {
            let mut client = caller.clone();
            async move {
                let request = SimpleRequest {
                    response_size: 16,
                    ..Default::default()
                };
                client.unary_call(request).await.map(|_| String::new())
            }
        },
        move |load| {
            let _ = load_tx.send(load);
        },
    ));
    let load = load_rx.await.expect("the load starts");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let memory_before = resident_bytes();
    load.set_restarting(true);

    // Bytes that are not HTTP/2.
    let answer = wire::send_raw(addr, &wire::not_http2(), BOUND)
        .await
        .expect("connects");
    println!(
        "not HTTP/2: closed={} goaway={:?}",
        answer.closed,
        answer.goaway()
    );
    assert!(answer.closed, "the connection is closed");
    if let Some(goaway) = answer.goaway() {
        assert_eq!(goaway.code, 0x1, "PROTOCOL_ERROR");
    }

    // Malformed frames: each a connection error with its code.
    for malformed in Malformed::ALL {
        let answer = wire::send_raw(addr, &malformed.bytes(), BOUND)
            .await
            .expect("connects");
        println!("{malformed:?}: goaway={:?}", answer.goaway());
        let goaway = answer
            .goaway()
            .unwrap_or_else(|| panic!("{malformed:?}: a GOAWAY"));
        let (rfc, h2) = malformed.expected_codes();
        assert!(
            goaway.code == rfc || goaway.code == h2,
            "{malformed:?}: GOAWAY code {:#x}",
            goaway.code
        );
        assert!(
            answer.closed,
            "{malformed:?}: then the connection is closed"
        );
    }

    // A request message over the limit: the prefix alone declares 4 GiB - 1.
    let lying = grpc::framed(false, &[], Some(u32::MAX));
    let code = grpc::call(addr, UNARY, &[], lying)
        .await
        .expect("an answer");
    assert_eq!(
        code,
        Code::ResourceExhausted,
        "a prefix over the decoding limit"
    );
    let over = grpc::framed(false, &vec![0u8; LIMIT + 1], None);
    let code = grpc::call(addr, UNARY, &[], over).await.expect("an answer");
    assert_eq!(
        code,
        Code::ResourceExhausted,
        "a message over the decoding limit"
    );

    // A response message over the limit.
    let too_big = SimpleRequest {
        response_size: i32::try_from(LIMIT + 1).expect("fits"),
        ..Default::default()
    };
    let status = good
        .clone()
        .unary_call(too_big)
        .await
        .expect_err("a response over the encoding limit is not sent");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");

    // A message that is not protobuf (a varint that never ends). tonic decodes a unary
    // request before it calls the handler, so the handler does not run (the good load's
    // calls run meanwhile, so the handler's count cannot show it here).
    let garbage = grpc::framed(false, &[0xff; 11], None);
    let code = grpc::call(addr, UNARY, &[], garbage)
        .await
        .expect("an answer");
    assert_eq!(code, Code::Internal, "invalid protobuf");

    // The rapid-reset flood.
    let flood = wire::rapid_reset(addr, UNARY, 20_000, BOUND)
        .await
        .expect("connects");
    let goaway = flood.answer.goaway();
    println!(
        "rapid reset: {} streams opened and reset; the server sent {} frames, then {:?}, closed={}",
        flood.opened,
        flood.answer.frames.len(),
        goaway,
        flood.answer.closed
    );
    assert!(flood.answer.closed, "the flood's connection ends");
    if flood.opened < 20_000 {
        assert_eq!(goaway.map(|g| g.code), Some(0xb), "ENHANCE_YOUR_CALM");
    }

    // Header lists: just over the limit, then far over it.
    let answer = wire::large_header_list(addr, UNARY, 20 << 10)
        .await
        .expect("an HTTP/2 connection");
    println!("header list of 20 KiB: {answer:?}");
    assert_eq!(
        answer,
        FloodAnswer::Status(http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    );
    let answer = wire::large_header_list(addr, UNARY, 1 << 20)
        .await
        .expect("an HTTP/2 connection");
    println!("header list of 1 MiB: {answer:?}");
    assert!(
        matches!(
            answer,
            FloodAnswer::Status(http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
                | FloodAnswer::GoAway(
                    h2::Reason::ENHANCE_YOUR_CALM | h2::Reason::COMPRESSION_ERROR
                )
        ),
        "{answer:?}"
    );

    // The CONTINUATION flood.
    let answer = wire::send_raw(addr, &wire::continuation_flood(10_000), BOUND)
        .await
        .expect("connects");
    println!("CONTINUATION flood: goaway={:?}", answer.goaway());
    assert_eq!(
        answer.goaway().map(|g| g.code),
        Some(0xb),
        "ENHANCE_YOUR_CALM"
    );

    load.set_restarting(false);
    let memory_after = resident_bytes();
    let grown = memory_after.saturating_sub(memory_before);
    println!(
        "resident memory: {} MiB before the attacks, {} MiB after (+{} KiB)",
        memory_before >> 20,
        memory_after >> 20,
        grown >> 10
    );
    assert!(grown < MEMORY_BOUND, "memory grew by {grown} bytes");

    let record = timeout(Duration::from_secs(30), good_load)
        .await
        .expect("the good load ends")
        .expect("the good load runs");
    println!(
        "good client: {} calls, {} failed ({} during the attacks)",
        record.sent,
        record.failed(),
        record.during_restart.len(),
    );
    assert_eq!(record.failed(), 0, "{:?}", record.failure_samples);
    assert!(
        !record.during_restart.is_empty(),
        "good calls ran during the attacks"
    );
    assert_eq!(panics.load(Ordering::SeqCst), 0, "nothing panicked");

    consumer.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}

/// The prost encoding of a good request, to show `grpc::call` reaches the handler with
/// a well-formed message (the bad ones above fail for their own reason only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_written_good_call_succeeds() {
    let hub = MemoryHub::new();
    let mut builder = common::builder("provider", &hub, Duration::ZERO);
    server::provide(&mut builder);
    let provider = builder.start().await.expect("provider starts");
    let addr = provider.local_addr().expect("listens");
    let message = SimpleRequest {
        response_size: 1,
        ..Default::default()
    }
    .encode_to_vec();
    let code = grpc::call(addr, UNARY, &[], grpc::framed(false, &message, None))
        .await
        .expect("an answer");
    assert_eq!(code, Code::Ok);
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}
