//! Streams through a graceful stop, shown rather than assumed, on the memory registry
//! and on etcd:
//!
//! - a server stream, a client stream and a bidi stream (ping-pong), each paced at 10
//!   messages/s, open on provider A of two; A shuts down gracefully. A stream that ends
//!   within the drain bound runs to its natural end; one that does not ends at the bound
//!   with `UNAVAILABLE`, "provider shut down before the stream ended" — never silently,
//!   never a hang — and is not replayed on B. New calls go to B, and unary calls sent
//!   throughout see no failure.
//! - a stream that has sent nothing yet when A refuses it (A is draining, the consumer
//!   does not know yet) goes to B, like a unary call.
//!
//! etcd's URL comes from `RPC_TEST_ETCD_URL` (`scripts/test.sh` starts etcd and sets it);
//! without it the etcd test says it was skipped, and with `RPC_TEST_REQUIRE_REGISTRIES=1`
//! (CI) it fails instead. Every wait is on a condition and bounded.

mod common;

use common::backend::Backend;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::{
    Payload, ResponseParameters, SimpleRequest, StreamingInputCallRequest,
    StreamingOutputCallRequest,
};
use rpc::config::RegistryConfig;
use rpc::registry::MemoryHub;
use rpc::transport::CUT_AT_SHUTDOWN;
use rpc::{Application, Phase, ReferenceChannel};
use rpc_testkit::interop::server;
use rpc_testkit::interop::service::{CallCounts, Method};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, timeout};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Status};

type Client = TestServiceClient<ReferenceChannel>;

/// Pause between two messages of a paced stream: 10 messages/s.
const PACE: Duration = Duration::from_millis(100);
/// A stream that ends within the drain bound: 8 messages, 0.8 s.
const SHORT: usize = 8;
/// A stream that does not: 300 messages, 30 s.
const LONG: usize = 300;
/// The provider's `step_timeout`: each drain step's bound.
const DRAIN_BOUND: Duration = Duration::from_secs(1);
/// No stream, call or shutdown of these tests may take longer: a hang fails the test.
const BOUND: Duration = Duration::from_secs(30);
/// Payload of each request and response message, in bytes.
const MESSAGE: usize = 64;

/// A provider of the interop service whose drain steps are bounded by [`DRAIN_BOUND`].
async fn provider(backend: &Backend, name: &str) -> (Application, Arc<CallCounts>) {
    let mut config = common::config(name);
    config.graceful_shutdown.step_timeout = DRAIN_BOUND;
    config.graceful_shutdown.consumer_update_wait_time = Duration::from_secs(2);
    config.graceful_shutdown.offline_request_window_timeout = Duration::from_millis(200);
    let mut builder = backend.builder(config);
    let service = server::provide(&mut builder);
    let app = builder.start().await.expect("provider starts");
    (app, service.calls().clone())
}

/// A consumer whose reference waits up to [`BOUND`] for response headers: a client
/// stream gets its headers only when it ends (tonic answers at half-close), and the
/// default 3 s would cut the long one before the provider does.
async fn consumer(backend: &Backend) -> (Application, Client) {
    let mut config = common::config("consumer");
    let mut reference = rpc::cluster::ReferenceConfig::default();
    reference.timeout = Some(BOUND);
    reference.methods.clear();
    config
        .consumer
        .references
        .insert("grpc.testing.TestService".to_owned(), reference);
    let mut builder = backend.builder(config);
    let client = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    (builder.start().await.expect("consumer starts"), client)
}

/// How a stream ended: messages it carried, and its status.
#[derive(Debug)]
struct Ended {
    messages: usize,
    status: Result<(), Status>,
    at: Instant,
}

fn payload() -> Payload {
    Payload {
        r#type: 0,
        body: Bytes::from(vec![0u8; MESSAGE]),
    }
}

fn paced(size: usize) -> ResponseParameters {
    ResponseParameters {
        size: i32::try_from(size).unwrap_or(i32::MAX),
        interval_us: i32::try_from(PACE.as_micros()).unwrap_or(i32::MAX),
        compressed: None,
    }
}

fn pace() -> tokio::time::Interval {
    let mut interval = tokio::time::interval(PACE);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// A server stream of `count` messages, paced by the provider.
async fn server_stream(mut client: Client, count: usize) -> Ended {
    let request = StreamingOutputCallRequest {
        response_parameters: (0..count).map(|_| paced(MESSAGE)).collect(),
        ..Default::default()
    };
    let mut messages = 0;
    let status = match client.streaming_output_call(request).await {
        Err(status) => Err(status),
        Ok(response) => {
            let mut stream = response.into_inner();
            loop {
                match stream.message().await {
                    Ok(Some(_)) => messages += 1,
                    Ok(None) => break Ok(()),
                    Err(status) => break Err(status),
                }
            }
        }
    };
    Ended {
        messages,
        status,
        at: Instant::now(),
    }
}

/// A client stream of `count` messages, paced by the client, then half-closed.
async fn client_stream(mut client: Client, count: usize) -> Ended {
    let (sender, receiver) = mpsc::channel(1);
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    let feeder = tokio::spawn(async move {
        let mut pace = pace();
        for _ in 0..count {
            pace.tick().await;
            let message = StreamingInputCallRequest {
                payload: Some(payload()),
                expect_compressed: None,
            };
            if sender.send(message).await.is_err() {
                return;
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let result = client
        .streaming_input_call(ReceiverStream::new(receiver))
        .await;
    feeder.abort();
    let messages = sent.load(std::sync::atomic::Ordering::SeqCst);
    let status = result.and_then(|response| {
        let total = response.into_inner().aggregated_payload_size;
        let expected = i32::try_from(messages * MESSAGE).unwrap_or(i32::MAX);
        if total == expected {
            Ok(())
        } else {
            Err(Status::data_loss(format!(
                "aggregated {total}, sent {expected}"
            )))
        }
    });
    Ended {
        messages,
        status,
        at: Instant::now(),
    }
}

/// Ping-pong paced at 10 rounds/s for `count` rounds, then half-closed.
async fn ping_pong(mut client: Client, count: usize) -> Ended {
    let ping = || StreamingOutputCallRequest {
        response_parameters: vec![paced(MESSAGE)],
        payload: Some(payload()),
        ..Default::default()
    };
    let (sender, receiver) = mpsc::channel(1);
    let _ = sender.try_send(ping());
    let mut messages = 0;
    let status = match client.full_duplex_call(ReceiverStream::new(receiver)).await {
        Err(status) => Err(status),
        Ok(response) => {
            let mut responses = response.into_inner();
            let mut pace = pace();
            let mut sender = Some(sender);
            loop {
                match responses.message().await {
                    Ok(Some(_)) => messages += 1,
                    Ok(None) if messages == count => break Ok(()),
                    Ok(None) => break Err(Status::data_loss("the stream ended early")),
                    Err(status) => break Err(status),
                }
                if messages == count {
                    sender = None; // half-close
                    continue;
                }
                pace.tick().await;
                if let Some(open) = &sender {
                    // A send that fails means the call ended; its status comes next.
                    let _ = open.send(ping()).await;
                }
            }
        }
    };
    Ended {
        messages,
        status,
        at: Instant::now(),
    }
}

/// Waits until `condition` holds, failing the test after [`BOUND`].
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One unary call of the background load: which provider answered, or the failure.
struct Unary {
    after_rejecting: bool,
    answer: Result<String, Status>,
}

/// Sends unary calls at 100/s until `stop` is set, noting for each whether `leaving`
/// already refused new calls when it was sent.
fn unary_load(
    client: Client,
    leaving: rpc::Lifecycle,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Unary>> {
    tokio::spawn(async move {
        let mut calls = Vec::new();
        let mut pace = tokio::time::interval(Duration::from_millis(10));
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            pace.tick().await;
            let after_rejecting = leaving.phase() >= Phase::Rejecting;
            let request = SimpleRequest {
                response_size: 1,
                fill_server_id: true,
                ..Default::default()
            };
            let answer = client
                .clone()
                .unary_call(request)
                .await
                .map(|response| response.into_inner().server_id);
            calls.push(Unary {
                after_rejecting,
                answer,
            });
        }
        calls
    })
}

async fn streams_through_a_graceful_stop(backend: Backend) {
    common::logs();
    let (a, a_calls) = provider(&backend, "provider-a").await;
    let (consumer_app, client) = consumer(&backend).await;

    // Every stream opens on A, the only provider the consumer knows yet.
    let streams = [
        tokio::spawn(server_stream(client.clone(), SHORT)),
        tokio::spawn(server_stream(client.clone(), LONG)),
        tokio::spawn(client_stream(client.clone(), SHORT)),
        tokio::spawn(client_stream(client.clone(), LONG)),
        tokio::spawn(ping_pong(client.clone(), SHORT)),
        tokio::spawn(ping_pong(client.clone(), LONG)),
    ];
    until("every stream reached A", || {
        [
            Method::StreamingOutput,
            Method::StreamingInput,
            Method::FullDuplex,
        ]
        .iter()
        .all(|&method| a_calls.get(method) == 2)
    })
    .await;

    let (b, b_calls) = provider(&backend, "provider-b").await;
    let b_addr = b.local_addr().expect("B listens").to_string();
    let directory = consumer_app.references()[0].directory().clone();
    until("the consumer knows B", || directory.list().len() == 2).await;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = unary_load(client.clone(), a.lifecycle().clone(), stop.clone());
    until("unary calls flow", || {
        a_calls.get(Method::Unary) + b_calls.get(Method::Unary) > 10
    })
    .await;

    let stop_started = Instant::now();
    let report = timeout(BOUND, a.before_shutdown())
        .await
        .expect("A's shutdown ends within the bound");
    let mut ended = Vec::new();
    for stream in streams {
        let result = timeout(BOUND, stream).await;
        ended.push(result.expect("no stream hangs").expect("stream task"));
    }
    // A few more calls after A is gone, then stop the load.
    let after = b_calls.get(Method::Unary);
    until("calls continue on B", || {
        b_calls.get(Method::Unary) > after + 10
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let unary = timeout(BOUND, load)
        .await
        .expect("load ends")
        .expect("load task");

    println!("A's shutdown: {report}");
    let names = [
        "server short",
        "server long",
        "client short",
        "client long",
        "bidi short",
        "bidi long",
    ];
    for (name, end) in names.iter().zip(&ended) {
        println!(
            "{name}: {} messages, {:?}, ended {} ms after the stop began",
            end.messages,
            end.status
                .as_ref()
                .map_err(|s| (s.code(), s.message().to_owned())),
            end.at.duration_since(stop_started).as_millis()
        );
    }

    // Streams that end within the bound run to their natural end.
    for end in [&ended[0], &ended[2], &ended[4]] {
        assert!(end.status.is_ok(), "{end:?}");
        assert_eq!(end.messages, SHORT, "{end:?}");
    }
    // The others end at the bound, with a status that says so; none lasted to its end.
    let drains_began = stop_started
        + report
            .steps
            .iter()
            .take(3)
            .map(|s| s.duration)
            .sum::<Duration>();
    for end in [&ended[1], &ended[3], &ended[5]] {
        let status = end.status.as_ref().expect_err("cut at the bound");
        assert_eq!(status.code(), Code::Unavailable, "{end:?}");
        assert_eq!(status.message(), CUT_AT_SHUTDOWN, "{end:?}");
        assert!(end.messages > 0 && end.messages < LONG, "{end:?}");
        // Order, not duration: the cut comes after the drain's bound began to run out.
        // That the stop itself ended them (not something later) is the status only the
        // provider's step 6 sends, and its report's count below.
        assert!(
            end.at >= drains_began + DRAIN_BOUND,
            "not cut before the bound: {end:?}"
        );
    }
    assert_eq!(report.streams_cut, 3, "{report}");
    assert_eq!(report.exit_code(), 1, "a cut stream is a forced stop");
    // Nothing was replayed on B.
    for method in [
        Method::StreamingOutput,
        Method::StreamingInput,
        Method::FullDuplex,
    ] {
        assert_eq!(b_calls.get(method), 0, "{method:?} replayed on B");
    }
    // No unary call failed; calls sent once A refused new ones were answered by B.
    let failures: Vec<_> = unary
        .iter()
        .filter_map(|u| u.answer.as_ref().err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} unary calls failed: {failures:?}",
        failures.len(),
        unary.len()
    );
    let late: Vec<_> = unary.iter().filter(|u| u.after_rejecting).collect();
    assert!(!late.is_empty());
    for call in late {
        assert_eq!(call.answer.as_deref().ok(), Some(b_addr.as_str()));
    }
    println!("unary calls: {} sent, 0 failed", unary.len());

    consumer_app.before_shutdown().await;
    b.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_streams_through_a_graceful_stop() {
    streams_through_a_graceful_stop(Backend::Memory(MemoryHub::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_streams_through_a_graceful_stop() {
    if let Some(backend) = Backend::etcd("streams") {
        streams_through_a_graceful_stop(backend).await;
    }
}

async fn a_refused_stream_that_sent_nothing_goes_elsewhere(backend: Backend) {
    common::logs();
    let (a, a_calls) = provider(&backend, "provider-a").await;
    let (b, b_calls) = provider(&backend, "provider-b").await;
    let a_addr = a.local_addr().expect("A listens");
    let b_addr = b.local_addr().expect("B listens");
    // The consumer knows A and B from a static list: it never hears of A's leaving, so
    // it still picks A while A refuses new calls (as over a slow registry); consistent
    // hashing lets the test choose A.
    let mut config = common::config("consumer");
    config.registries.insert(
        "default".to_owned(),
        RegistryConfig::new(format!("static://{a_addr},{b_addr}")),
    );
    let mut reference = rpc::cluster::ReferenceConfig::default();
    reference.loadbalance = rpc::cluster::LoadBalanceKind::ConsistentHash;
    config
        .consumer
        .references
        .insert("grpc.testing.TestService".to_owned(), reference);
    let mut builder = Application::builder(config);
    let client = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer_app = builder.start().await.expect("consumer starts");
    let directory = consumer_app.references()[0].directory().clone();
    until("the consumer knows A and B", || directory.list().len() == 2).await;

    let key_to_a = find_key_to(&client, &a_addr.to_string()).await;
    // Hold A in its drain with a long stream from a plain tonic client, so that our
    // consumer learns nothing from A (no closing mark) before its stream is refused.
    let mut plain = TestServiceClient::connect(format!("http://{a_addr}"))
        .await
        .expect("plain client connects");
    let request = StreamingOutputCallRequest {
        response_parameters: (0..LONG).map(|_| paced(MESSAGE)).collect(),
        ..Default::default()
    };
    let mut holding = plain
        .streaming_output_call(request)
        .await
        .expect("holding stream opens")
        .into_inner();
    holding
        .message()
        .await
        .expect("first message")
        .expect("a message");
    let shutdown = tokio::spawn(a.before_shutdown());
    let mut phases = a.watch_phase();
    timeout(
        BOUND,
        phases.wait_for(|phase| *phase >= Phase::DrainingInbound),
    )
    .await
    .expect("A drains within the bound")
    .expect("phase");

    // A stream that has sent nothing yet: A refuses it, it goes to B.
    let (sender, receiver) = mpsc::channel(1);
    let mut request = Request::new(ReceiverStream::new(receiver));
    request
        .metadata_mut()
        .insert("rpc-hash-key", key_to_a.parse().expect("ascii key"));
    let mut duplex = client.clone();
    let response = timeout(BOUND, duplex.full_duplex_call(request))
        .await
        .expect("no hang")
        .expect("the refused stream is answered elsewhere");
    let mut responses = response.into_inner();
    sender
        .send(StreamingOutputCallRequest {
            response_parameters: vec![ResponseParameters {
                size: 3,
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .expect("the stream takes a message");
    let answer = responses
        .message()
        .await
        .expect("a response")
        .expect("one message");
    assert_eq!(answer.payload.map(|p| p.body.len()), Some(3));
    drop(sender);
    assert!(responses.message().await.expect("ends OK").is_none());
    assert_eq!(
        a_calls.get(Method::FullDuplex),
        0,
        "A refused it before its handler"
    );
    assert_eq!(b_calls.get(Method::FullDuplex), 1, "B served it");
    let stats = consumer_app.references()[0].stats();
    println!("consumer: {stats:?}");
    assert!(stats.reroutes >= 1);

    drop(holding);
    let report = timeout(BOUND, shutdown)
        .await
        .expect("A stops")
        .expect("task");
    println!("A's shutdown: {report}");
    consumer_app.before_shutdown().await;
    b.before_shutdown().await;
}

/// A value of the hash key that the consumer's consistent hashing sends to `target`.
async fn find_key_to(client: &Client, target: &str) -> String {
    for n in 0..500 {
        let key = format!("key-{n}");
        let mut request = Request::new(SimpleRequest {
            fill_server_id: true,
            ..Default::default()
        });
        request
            .metadata_mut()
            .insert("rpc-hash-key", key.parse().expect("ascii key"));
        let response = client
            .clone()
            .unary_call(request)
            .await
            .expect("unary call");
        if response.into_inner().server_id == target {
            return key;
        }
    }
    panic!("no key of 500 hashes to {target}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_that_sent_nothing_goes_elsewhere_on_memory() {
    a_refused_stream_that_sent_nothing_goes_elsewhere(Backend::Memory(MemoryHub::new())).await;
}
