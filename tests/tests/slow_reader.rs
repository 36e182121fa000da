//! Readers that stop reading do not stall their neighbours (issue 35): one provider of
//! gRPC's `TestService`, one consumer reference to it (so every call below shares the
//! consumer's connection to that one instance), and:
//!
//! 1. 500 unary calls, 8 at a time: the steady latency;
//! 2. 3 server streams of 200 × 64 KiB whose readers never read: each provider handler is
//!    let go on until it has handed at least 30 responses (≈ 1.9 MiB) to the transport —
//!    5.6 MiB for the three, more than the 5 MiB connection window hyper used by default,
//!    which left every other call on the connection stalled until its timeout;
//! 3. 500 unary calls more, 8 at a time, with the 3 streams paused: **0 fail** (the
//!    reference's timeout is 2 s: a call stuck behind a full connection window fails);
//!    the p99 of both rounds and their ratio are printed, not asserted (wall-clock time
//!    on a shared machine: the 0 failures within 2 s are what can fail here);
//! 4. the 3 readers read on: every stream delivers its 200 responses, whole.
//!
//! The streams stay paused by flow control (asserted: fewer than 200 handed while no one
//! reads), not by the handlers. Every wait is on a condition and bounded.

mod common;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use parking_lot::Mutex;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::test_service_server::{TestService, TestServiceServer};
use proto::interop::{
    Empty, Payload, ResponseParameters, SimpleRequest, SimpleResponse, StreamingInputCallRequest,
    StreamingInputCallResponse, StreamingOutputCallRequest, StreamingOutputCallResponse,
};
use rpc::ReferenceChannel;
use rpc::registry::MemoryHub;
use tonic::{Request, Response, Status, Streaming};

/// Unary calls in each round, and how many at a time.
const CALLS: usize = 500;
const CONCURRENCY: usize = 8;
/// Paused streams, the responses each asks for, and their size.
const STREAMS: usize = 3;
const RESPONSES: usize = 200;
const RESPONSE_SIZE: usize = 64 * 1024;
/// Responses each paused stream's handler must have handed to the transport before the
/// second round: 3 × 30 × 64 KiB = 5.6 MiB, past hyper's former 5 MiB connection window.
const HANDED: usize = 30;
/// The paused streams get this long to take `HANDED` responses each.
const FILL_BOUND: Duration = Duration::from_secs(10);
/// A unary call that takes longer fails.
const UNARY_TIMEOUT: Duration = Duration::from_secs(2);
/// Nothing in this test may take longer.
const BOUND: Duration = Duration::from_secs(60);

/// `TestService` with what this test uses: `UnaryCall` echoes its payload,
/// `StreamingOutputCall` streams the responses asked for, counting per stream how many
/// the transport has taken. The rest answer UNIMPLEMENTED.
#[derive(Clone, Default)]
struct CountingService {
    /// Responses taken from each stream's handler, by the stream's arrival order.
    handed: Arc<Mutex<Vec<Arc<AtomicUsize>>>>,
}

impl CountingService {
    fn handed(&self) -> Vec<usize> {
        let streams = self.handed.lock();
        streams.iter().map(|n| n.load(Ordering::SeqCst)).collect()
    }
}

type Responses = Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

#[tonic::async_trait]
impl TestService for CountingService {
    type StreamingOutputCallStream = Responses;
    type FullDuplexCallStream = Responses;

    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Ok(Response::new(Empty {}))
    }

    async fn unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        Ok(Response::new(SimpleResponse {
            payload: request.into_inner().payload,
            ..SimpleResponse::default()
        }))
    }

    async fn streaming_output_call(
        &self,
        request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<Responses>, Status> {
        let handed = Arc::new(AtomicUsize::new(0));
        self.handed.lock().push(handed.clone());
        let sizes: Vec<usize> = (request.into_inner().response_parameters.iter())
            .map(|parameters| parameters.size.max(0) as usize)
            .collect();
        // Polled only when the transport has room for more: the count is what it took.
        let responses = futures_util::stream::iter(sizes).map(move |size| {
            handed.fetch_add(1, Ordering::SeqCst);
            Ok(StreamingOutputCallResponse {
                payload: Some(zeros(size)),
            })
        });
        Ok(Response::new(Box::pin(responses)))
    }

    async fn streaming_input_call(
        &self,
        _: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        Err(Status::unimplemented("not used by this test"))
    }

    async fn full_duplex_call(
        &self,
        _: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<Responses>, Status> {
        Err(Status::unimplemented("not used by this test"))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("unimplemented by definition"))
    }
}

fn zeros(size: usize) -> Payload {
    Payload {
        r#type: 0,
        body: vec![0; size].into(),
    }
}

/// `CALLS` unary calls, `CONCURRENCY` at a time: their latencies, and the failures.
async fn unary_round(client: &TestServiceClient<ReferenceChannel>) -> (Vec<Duration>, Vec<Status>) {
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(CALLS)));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let mut client = client.clone();
            let (latencies, failures) = (latencies.clone(), failures.clone());
            tokio::spawn(async move {
                for _ in 0..CALLS / CONCURRENCY {
                    let request = SimpleRequest {
                        payload: Some(zeros(64)),
                        ..SimpleRequest::default()
                    };
                    let started = Instant::now();
                    match client.unary_call(request).await {
                        Ok(_) => latencies.lock().push(started.elapsed()),
                        Err(status) => failures.lock().push(status),
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a caller does not panic");
    }
    let latencies = std::mem::take(&mut *latencies.lock());
    let failures = std::mem::take(&mut *failures.lock());
    (latencies, failures)
}

fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_stream_readers_leave_unary_calls_to_the_same_instance_unharmed() {
    common::logs();
    tokio::time::timeout(BOUND, scenario())
        .await
        .expect("the test ends within its bound");
}

async fn scenario() {
    let hub = MemoryHub::new();
    let service = CountingService::default();
    let mut builder = common::builder("slow-reader-provider", &hub, Duration::ZERO);
    builder.service(TestServiceServer::new(service.clone()));
    let provider = builder.start().await.expect("the provider starts");

    let mut config = common::config("slow-reader-consumer");
    let reference = config
        .consumer
        .references
        .entry("grpc.testing.TestService".to_owned())
        .or_default();
    reference.timeout = Some(UNARY_TIMEOUT);
    reference
        .methods
        .entry("StreamingOutputCall".to_owned())
        .or_default()
        .timeout = Some(BOUND);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let client = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer = builder.start().await.expect("the consumer starts");

    let (steady, failed) = unary_round(&client).await;
    assert!(failed.is_empty(), "steady round: {failed:?}");

    let paused = open_paused_streams(&client).await;
    // Three paused streams fill a connection window smaller than theirs before their
    // handlers get this far: that is the stall this test is about.
    tokio::time::timeout(FILL_BOUND, wait_until_handed(&service))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the paused streams' handlers handed {:?} responses, each should reach \
                 {HANDED}: the connection's window is full",
                service.handed()
            )
        });
    let handed = service.handed();
    assert!(
        handed.iter().all(|&n| n < RESPONSES),
        "flow control holds the unread streams back (handed {handed:?} of {RESPONSES})"
    );

    let (during, failed) = unary_round(&client).await;
    assert!(
        failed.is_empty(),
        "{} of {CALLS} unary calls failed beside the paused streams: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    let (steady, during) = (p99(steady), p99(during));
    println!(
        "handed before the second round {handed:?}; unary p99 steady {steady:?}, beside \
         {STREAMS} paused streams {during:?} ({:.2}x)",
        during.as_secs_f64() / steady.as_secs_f64()
    );

    for (index, stream) in paused.into_iter().enumerate() {
        read_whole(index, stream).await;
    }
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}

/// Opens `STREAMS` server streams and reads nothing from them.
async fn open_paused_streams(
    client: &TestServiceClient<ReferenceChannel>,
) -> Vec<Streaming<StreamingOutputCallResponse>> {
    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        let request = StreamingOutputCallRequest {
            response_parameters: vec![
                ResponseParameters {
                    size: RESPONSE_SIZE as i32,
                    ..ResponseParameters::default()
                };
                RESPONSES
            ],
            ..StreamingOutputCallRequest::default()
        };
        let response = client
            .clone()
            .streaming_output_call(request)
            .await
            .expect("a stream opens");
        streams.push(response.into_inner());
    }
    streams
}

/// Until every paused stream's handler has handed `HANDED` responses to the transport.
async fn wait_until_handed(service: &CountingService) {
    loop {
        let handed = service.handed();
        if handed.len() == STREAMS && handed.iter().all(|&n| n >= HANDED) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads a paused stream to its end: all `RESPONSES`, each whole.
async fn read_whole(index: usize, mut stream: Streaming<StreamingOutputCallResponse>) {
    let mut received = 0;
    while let Some(response) = stream.message().await.transpose() {
        let response = response.unwrap_or_else(|status| panic!("stream {index}: {status}"));
        let size = response.payload.map_or(0, |payload| payload.body.len());
        assert_eq!(size, RESPONSE_SIZE, "stream {index}, response {received}");
        received += 1;
    }
    assert_eq!(
        received, RESPONSES,
        "stream {index} delivered every response"
    );
}
