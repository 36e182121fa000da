//! Across hops: a plain tonic client calls provider A; A's handler works, then calls
//! provider B through a reference.
//! - Deadlines: B is sent only what remains of the client's deadline, a retry less than
//!   its first attempt, and a request with no time left is refused before B's handler.
//! - Trace context: the client's `traceparent` continues through A to B, one trace id
//!   end to end, each hop a child of the one before; A's access-log lines carry it.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::{Greeter, GreeterServer};
use proto::greeter::{HelloReply, HelloRequest};
use rpc::core::TraceContext;
use rpc::registry::MemoryHub;
use rpc::{Application, CallContext, Config, ConfigFormat, ReferenceChannel};
use tonic::{Code, Status};

/// Provider B: records the `grpc-timeout` of every request it executes; the first
/// `failures` requests fail UNAVAILABLE after 20 ms (so a retry leaves visibly later).
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Option<Duration>>>>,
    failures: Arc<AtomicUsize>,
    /// The `traceparent` each request came with, and B's own span in the trace.
    traces: Arc<Mutex<Vec<ReceivedTrace>>>,
}

/// What B saw of a request's trace: the `traceparent` it came with, and B's own span.
type ReceivedTrace = (Option<TraceContext>, Option<TraceContext>);

#[tonic::async_trait]
impl Echo for Recorder {
    async fn echo(
        &self,
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<EchoReply>, Status> {
        let headers = request.metadata().clone().into_headers();
        self.seen
            .lock()
            .push(rpc::core::metadata::grpc_timeout(&headers));
        let served = CallContext::current().and_then(|served| served.trace().cloned());
        self.traces
            .lock()
            .push((TraceContext::from_headers(&headers), served));
        let failing = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if failing {
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Err(Status::unavailable("scripted failure"));
        }
        Ok(tonic::Response::new(EchoReply {
            payload: request.into_inner().payload,
            provider: String::new(),
        }))
    }
}

/// Provider A: works `work`, then calls B; answers what A's handler saw of its own
/// deadline in the reply's message (milliseconds left when it called B).
struct Gateway {
    work: Duration,
    echo: EchoClient<ReferenceChannel>,
    /// A's span in the trace of each call it served.
    traces: Arc<Mutex<Vec<Option<TraceContext>>>>,
}

#[tonic::async_trait]
impl Greeter for Gateway {
    async fn say_hello(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, Status> {
        tokio::time::sleep(self.work).await;
        let served = CallContext::current();
        let left = served.as_ref().and_then(CallContext::remaining);
        self.traces
            .lock()
            .push(served.and_then(|served| served.trace().cloned()));
        let request = EchoRequest {
            payload: bytes::Bytes::from_static(b"x"),
            delay_ms: None,
        };
        self.echo.clone().echo(request).await?;
        Ok(tonic::Response::new(HelloReply {
            message: format!("{:?}", left.map(|left| left.as_millis())),
            provider: String::new(),
        }))
    }

    type SayHelloStreamStream = futures_util::stream::Empty<Result<HelloReply, Status>>;

    async fn say_hello_stream(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<Self::SayHelloStreamStream>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

async fn provider_b(hub: &MemoryHub, recorder: &Recorder) -> Application {
    let mut builder = common::builder("b", hub, Duration::ZERO);
    builder.service(EchoServer::new(recorder.clone()));
    builder.start().await.expect("B starts")
}

/// Provider A, whose reference to B has the settings `reference`; its spans in the
/// trace of each call go to `traces`.
async fn provider_a(
    hub: &MemoryHub,
    work: Duration,
    reference: &str,
    traces: &Arc<Mutex<Vec<Option<TraceContext>>>>,
    access_log: Option<&Path>,
) -> Application {
    let access_log = match access_log {
        Some(path) => format!(
            "access_log: {{ enabled: true, path: '{}' }}\n",
            path.display()
        ),
        None => String::new(),
    };
    let text = format!(
        "application: {{ name: a, logging: false }}\n\
         admin: {{ port: 0 }}\n\
         graceful_shutdown: {{ internal_signal: false }}\n\
         {access_log}\
         consumer:\n  references:\n    echo.Echo: {{ {reference} }}\n"
    );
    let config = Config::from_str(&text, ConfigFormat::Yaml, "a.yaml").expect("valid");
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    let echo = EchoClient::new(builder.reference("echo.Echo"));
    let traces = traces.clone();
    builder.service(GreeterServer::new(Gateway { work, echo, traces }));
    builder.start().await.expect("A starts")
}

async fn client_of(app: &Application) -> GreeterClient<tonic::transport::Channel> {
    let address = app.local_addr().expect("A listens");
    GreeterClient::connect(format!("http://{address}"))
        .await
        .expect("client connects")
}

fn hello(deadline: Option<Duration>) -> tonic::Request<HelloRequest> {
    let mut request = tonic::Request::new(HelloRequest {
        name: "chain".into(),
        count: 0,
    });
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_hop_gets_what_remains_and_a_retry_gets_less() {
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    // Two instances of B: failover sends a retry to another instance.
    let b = [
        provider_b(&hub, &recorder).await,
        provider_b(&hub, &recorder).await,
    ];
    let traces = Arc::default();
    let a = provider_a(
        &hub,
        Duration::from_millis(700),
        "idempotent: true, retries: 1",
        &traces,
        None,
    )
    .await;
    let mut client = client_of(&a).await;

    let deadline = Duration::from_secs(1);
    let reply = client
        .say_hello(hello(Some(deadline)))
        .await
        .expect("the chain answers");
    let sent = recorder.seen.lock().clone();
    println!(
        "across_hops: client deadline {deadline:?}, A worked 700 ms, A saw {} ms left; B was sent {sent:?}",
        reply.get_ref().message
    );
    let [Some(sent)] = sent[..] else {
        panic!("B executes one request, with a deadline: {sent:?}")
    };
    assert!(
        sent <= deadline - Duration::from_millis(700),
        "B gets at most what remains after A's 700 ms of work: {sent:?}"
    );

    // A retry sends only what remains after the failed attempt.
    recorder.seen.lock().clear();
    recorder.failures.store(1, Ordering::SeqCst);
    client
        .say_hello(hello(Some(deadline)))
        .await
        .expect("the retry answers");
    let sent = recorder.seen.lock().clone();
    println!("across_hops: first attempt and retry were sent {sent:?}");
    let [Some(first), Some(retry)] = sent[..] else {
        panic!("B executes a failed first attempt and a retry, both with deadlines: {sent:?}")
    };
    assert!(first <= Duration::from_millis(300), "{first:?}");
    assert!(
        retry < first,
        "the retry is sent less than the first attempt: {sent:?}"
    );

    // Without a deadline from the client, B is sent none: A's reference timeout bounds
    // each attempt until its response head, and is not a deadline for B.
    recorder.seen.lock().clear();
    client
        .say_hello(hello(None))
        .await
        .expect("the chain answers");
    assert_eq!(*recorder.seen.lock(), [None]);

    a.before_shutdown().await;
    for b in b {
        b.before_shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_no_time_left_is_refused_before_its_handler() {
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    let b = provider_b(&hub, &recorder).await;
    let address = b.local_addr().expect("B listens");
    // Written by hand over h2: a tonic client enforces a `grpc-timeout` it sends, and
    // with none left it may end the call itself (CANCELLED) before B's answer arrives.
    let message = prost::Message::encode_to_vec(&EchoRequest {
        payload: bytes::Bytes::from_static(b"x"),
        delay_ms: None,
    });
    let answer = rpc_testkit::wire::grpc::exchange(
        address,
        "/echo.Echo/Echo",
        &[("grpc-timeout", "0m")],
        rpc_testkit::wire::grpc::framed(false, &message, None),
    )
    .await
    .expect("B answers");
    // tonic reads the status as a client would (its message percent-decoded).
    let status = Status::from_header_map(&answer.headers)
        .or_else(|| Status::from_header_map(answer.trailers.as_ref()?))
        .unwrap_or_else(|| panic!("a status: {answer:?}"));
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), rpc::core::metadata::NO_TIME_LEFT);
    assert!(recorder.seen.lock().is_empty(), "B's handler never ran");
    b.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_that_opts_out_sends_no_inherited_deadline() {
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    let b = provider_b(&hub, &recorder).await;
    let traces = Arc::default();
    let a = provider_a(
        &hub,
        Duration::from_millis(10),
        "inherit_deadline: false",
        &traces,
        None,
    )
    .await;
    let mut client = client_of(&a).await;
    client
        .say_hello(hello(Some(Duration::from_secs(5))))
        .await
        .expect("the chain answers");
    assert_eq!(
        *recorder.seen.lock(),
        [None],
        "the opt-out sends no deadline"
    );
    a.before_shutdown().await;
    b.before_shutdown().await;
}

/// The client's span, as its `traceparent` names it (the W3C example's ids).
const CLIENT_TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_id_from_the_client_through_a_to_b_each_hop_a_child() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("a.log");
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    let b = provider_b(&hub, &recorder).await;
    let a_traces = Arc::default();
    let a = provider_a(&hub, Duration::ZERO, "", &a_traces, Some(&log)).await;
    let mut client = client_of(&a).await;

    let mut request = hello(None);
    request
        .metadata_mut()
        .insert("traceparent", CLIENT_TRACEPARENT.parse().expect("valid"));
    request
        .metadata_mut()
        .insert("baggage", "tenant=blue".parse().expect("valid"));
    client.say_hello(request).await.expect("the chain answers");

    let client_span = TraceContext::from_headers(&{
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", CLIENT_TRACEPARENT.parse().unwrap());
        headers
    })
    .unwrap();
    let a_span = a_traces.lock()[0]
        .clone()
        .expect("A runs in the client's trace");
    let (sent_to_b, b_span) = recorder.traces.lock()[0].clone();
    let (sent_to_b, b_span) = (
        sent_to_b.expect("A sent traceparent"),
        b_span.expect("B's span"),
    );
    println!(
        "across_hops: trace {} — client span {}, A {} (parent {:?}), sent to B {}, B {} (parent {:?})",
        client_span.trace_id_hex(),
        client_span.span_id_hex(),
        a_span.span_id_hex(),
        a_span.parent_span_id().map(|id| format!("{id:016x}")),
        sent_to_b.span_id_hex(),
        b_span.span_id_hex(),
        b_span.parent_span_id().map(|id| format!("{id:016x}")),
    );
    for hop in [&a_span, &sent_to_b, &b_span] {
        assert_eq!(
            hop.trace_id(),
            client_span.trace_id(),
            "one trace id end to end"
        );
    }
    assert_eq!(
        a_span.parent_span_id(),
        Some(client_span.span_id()),
        "A is the client's child"
    );
    assert_eq!(
        b_span.parent_span_id(),
        Some(sent_to_b.span_id()),
        "B is the attempt's child"
    );
    let distinct: std::collections::BTreeSet<u64> = [
        client_span.span_id(),
        a_span.span_id(),
        sent_to_b.span_id(),
        b_span.span_id(),
    ]
    .into();
    assert_eq!(distinct.len(), 4, "every hop a span of its own");
    let mut b_headers = http::HeaderMap::new();
    sent_to_b.write_to(&mut b_headers);
    assert_eq!(b_headers["baggage"], "tenant=blue", "baggage travels on");

    // A's access log: its served call and the call it made, both in the client's trace.
    let trace_id = client_span.trace_id_hex().to_string();
    let lines = common::json_lines(&log, 2).await;
    for line in &lines {
        assert_eq!(line["trace_id"], trace_id.as_str(), "{line}");
    }

    // A client that sends no traceparent: A starts a trace, and B continues it.
    recorder.traces.lock().clear();
    client
        .say_hello(hello(None))
        .await
        .expect("the chain answers");
    let started = a_traces.lock()[1].clone().expect("A starts a trace");
    assert_eq!(started.parent_span_id(), None);
    let (sent_to_b, _) = recorder.traces.lock()[0].clone();
    assert_eq!(
        sent_to_b.expect("traceparent").trace_id(),
        started.trace_id()
    );

    a.before_shutdown().await;
    b.before_shutdown().await;
}
