//! Streams, plain tonic against the whole rpc stack: server streaming and client
//! streaming at 100 B and 64 KiB messages, and bidirectional ping-pong.
//!
//! Both stacks serve gRPC's interop `TestService` (`rpc_testkit::interop::service`, the
//! same handlers, no compression) on loopback over one HTTP/2 connection: plain tonic's
//! `Server` and `Channel`, and an `Application` provider found through the in-process
//! registry by an `Application` consumer (metrics and tracing on). A "call" of each
//! shape:
//! - `server_stream`: one request asks for `MESSAGES` responses of the size;
//! - `client_stream`: `MESSAGES` request messages of the size, one summary back;
//! - `ping_pong`: `ROUND_TRIPS` request/response pairs of 100 B on one stream, each
//!   sent when the previous answer came back (its p99 is a whole call's).
//!
//! For each shape, `STREAMING_ROUNDS` (default 5) back-to-back pairs of
//! `STREAMING_MILLIS` (default 1000) runs at `STREAMING_CALLS` (default 4) concurrent
//! calls; one line each:
//! `streaming: shape=server_stream size=64KiB messages_per_call=100 plain_msgs_s=…
//! rpc_msgs_s=… rpc_mb_s=… rpc_p99_us=… qps_ratio=X p99_ratio=Y` (rpc / plain, medians of
//! the per-pair ratios; messages and bytes counted in the shape's main direction; the
//! p99 is a whole call's; the messages/s are each stack's median run on its own, which
//! on a noisy machine may lean the other way from the pairs' ratio). Last line:
//! `streaming: min_qps_ratio=X`.
//! `STREAMING_SHAPES=ping_pong,...` measures only those shapes (`server_stream`,
//! `client_stream`, `ping_pong`; a shape's two sizes both run); a name it does not know
//! exits 2. `STREAMING_SIDE=consumer` measures our consumer against tonic's
//! server, `STREAMING_SIDE=provider` tonic's client against our provider (default
//! `both`: ours on both sides). `STREAMING_ROUNDS`, `STREAMING_MILLIS` and
//! `STREAMING_CALLS` that are 0 or not numbers fall back to their defaults.
//!
//! `STREAMING_PROFILE=plain|rpc|rpc-resumable|rpc-server` runs one stack alone for
//! `STREAMING_PROFILE_MILLIS` (default 5000) on server streams of 1 000 messages of
//! 100 B, for a profiler or `bash benches/instructions.sh streaming`: `rpc-resumable` is
//! ours with the method declared resumable (`methods.StreamingOutputCall.resumable`),
//! so the two `rpc` rows differ by the resume layer's cost; `rpc-server` is tonic's
//! client against our provider. With `STREAMING_SHAPES` the
//! profile runs the first shape it names, in the order above, at its smaller size
//! (`ping_pong`: calls of 100 round trips).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::test_service_server::TestServiceServer;
use proto::interop::{
    Payload, ResponseParameters, StreamingInputCallRequest, StreamingOutputCallRequest,
};
use rpc::cluster::{MethodConfig, ReferenceConfig};
use rpc::registry::{MemoryHub, StaticRegistry};
use rpc::{Application, ReferenceChannel};
use rpc_benches::stacks::{config, loopback_incoming, plain_channel};
use rpc_benches::{
    BoxedCall, compare, drive, env_name, env_names, env_u64, profile, trace_as_in_production,
};
use rpc_testkit::interop::service::InteropService;
use tonic::transport::Channel;

/// The interop service's gRPC name.
const TEST_SERVICE: &str = "grpc.testing.TestService";

/// The stream shapes measured: name, message size, messages per call.
const SHAPES: [(Shape, usize, usize); 5] = [
    (Shape::ServerStream, 100, 1_000),
    (Shape::ServerStream, 64 * 1024, 100),
    (Shape::ClientStream, 100, 1_000),
    (Shape::ClientStream, 64 * 1024, 100),
    (Shape::PingPong, 100, 100),
];

#[derive(Clone, Copy, Debug)]
enum Shape {
    ServerStream,
    ClientStream,
    PingPong,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Self::ServerStream => "server_stream",
            Self::ClientStream => "client_stream",
            Self::PingPong => "ping_pong",
        }
    }
}

fn payload(size: usize) -> Payload {
    Payload {
        r#type: 0,
        body: Bytes::from(vec![7u8; size]),
    }
}

/// One call of `shape`: `messages` messages of `size` bytes; panics naming `name` if the
/// call fails or a message is missing.
async fn call<T>(
    mut client: TestServiceClient<T>,
    name: &'static str,
    shape: Shape,
    size: usize,
    messages: usize,
) where
    T: tonic::client::GrpcService<tonic::body::Body> + Send + 'static,
    T::Future: Send,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let parameters = ResponseParameters {
        size: i32::try_from(size).expect("sizes fit i32"),
        ..ResponseParameters::default()
    };
    match shape {
        Shape::ServerStream => {
            let request = StreamingOutputCallRequest {
                response_parameters: vec![parameters; messages],
                ..StreamingOutputCallRequest::default()
            };
            let mut stream = client
                .streaming_output_call(request)
                .await
                .unwrap_or_else(|status| panic!("{name} server stream opens: {status}"))
                .into_inner();
            let mut received = 0;
            while let Some(message) = stream.next().await {
                message.unwrap_or_else(|status| panic!("{name} server stream: {status}"));
                received += 1;
            }
            assert_eq!(received, messages, "{name}: every message arrives");
        }
        Shape::ClientStream => {
            let body = payload(size);
            let requests =
                futures_util::stream::iter((0..messages).map(move |_| StreamingInputCallRequest {
                    payload: Some(body.clone()),
                    ..StreamingInputCallRequest::default()
                }));
            let summary = client
                .streaming_input_call(requests)
                .await
                .unwrap_or_else(|status| panic!("{name} client stream: {status}"))
                .into_inner();
            assert_eq!(summary.aggregated_payload_size as usize, size * messages);
        }
        Shape::PingPong => {
            let (send, requests) = tokio::sync::mpsc::channel(1);
            let ping = StreamingOutputCallRequest {
                response_parameters: vec![parameters],
                payload: Some(payload(size)),
                ..StreamingOutputCallRequest::default()
            };
            send.send(ping.clone())
                .await
                .expect("the stream takes the first ping");
            let mut answers = client
                .full_duplex_call(tokio_stream::wrappers::ReceiverStream::new(requests))
                .await
                .unwrap_or_else(|status| panic!("{name} duplex opens: {status}"))
                .into_inner();
            for round in 1..=messages {
                answers
                    .next()
                    .await
                    .unwrap_or_else(|| panic!("{name}: answer {round} arrives"))
                    .unwrap_or_else(|status| panic!("{name} duplex: {status}"));
                if round < messages {
                    send.send(ping.clone())
                        .await
                        .expect("the stream takes a ping");
                }
            }
            drop(send);
            assert!(answers.next().await.is_none(), "{name}: the call ends");
        }
    }
}

/// Calls of `shape` on `client`, boxed so that both stacks share one type.
fn calls<T>(
    client: TestServiceClient<T>,
    name: &'static str,
    shape: Shape,
    size: usize,
    messages: usize,
) -> impl Fn() -> BoxedCall + Clone + Send + Sync + 'static
where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + Sync + 'static,
    T::Future: Send,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    move || -> BoxedCall { Box::pin(call(client.clone(), name, shape, size, messages)) }
}

/// Plain tonic's server of the service on `127.0.0.1:0` (TCP_NODELAY); its address.
async fn plain_server() -> SocketAddr {
    let (addr, incoming) = loopback_incoming().await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TestServiceServer::new(InteropService::new()))
            .serve_with_incoming(incoming),
    );
    addr
}

/// Plain tonic's client of the service at `addr`, connected (TCP_NODELAY).
async fn plain_client(addr: SocketAddr) -> TestServiceClient<Channel> {
    TestServiceClient::new(plain_channel(addr).await)
}

/// Our provider of the service, registered in `registry` (its address from
/// `local_addr`).
async fn our_provider(registry: Arc<dyn rpc::core::Registry>) -> Application {
    let mut provider = Application::builder(config("provider", true));
    provider.registry("default", registry);
    provider.service(TestServiceServer::new(InteropService::new()));
    provider.start().await.expect("the provider starts")
}

/// Our consumer of the service, finding it in `registry`, its server stream resumable
/// when `resumable` says; its stub and application.
async fn our_consumer(
    registry: Arc<dyn rpc::core::Registry>,
    resumable: bool,
) -> (TestServiceClient<ReferenceChannel>, Application) {
    let mut config = config("consumer", true);
    if resumable {
        let mut method = MethodConfig::default();
        method.resumable = true;
        let mut reference = ReferenceConfig::default();
        reference
            .methods
            .insert("StreamingOutputCall".to_owned(), method);
        config
            .consumer
            .references
            .insert(TEST_SERVICE.to_owned(), reference);
    }
    let mut consumer = Application::builder(config);
    consumer.registry("default", registry);
    let client = TestServiceClient::new(consumer.reference(TEST_SERVICE));
    (client, consumer.start().await.expect("the consumer starts"))
}

/// The client measured against plain tonic, as `side` says: `both` (default,
/// our consumer and our provider), `consumer` (our consumer against tonic's server) or
/// `provider` (tonic's client against our provider); the applications to keep.
async fn measured_client(side: &str) -> (MeasuredClient, Vec<Application>) {
    let hub = MemoryHub::new();
    match side {
        "consumer" => {
            let addr = plain_server().await;
            let registry = StaticRegistry::new(vec![(addr.ip().to_string(), addr.port())]);
            let (client, app) = our_consumer(Arc::new(registry), false).await;
            (MeasuredClient::Ours(client), vec![app])
        }
        "provider" => {
            let (client, provider) = plain_client_of_our_provider().await;
            (MeasuredClient::Plain(client), vec![provider])
        }
        _ => {
            let provider = our_provider(Arc::new(hub.client())).await;
            let (client, consumer) = our_consumer(Arc::new(hub.client()), false).await;
            (MeasuredClient::Ours(client), vec![consumer, provider])
        }
    }
}

/// Tonic's client against our provider (found through no registry: dialled directly),
/// and the provider.
async fn plain_client_of_our_provider() -> (TestServiceClient<Channel>, Application) {
    let hub = MemoryHub::new();
    let provider = our_provider(Arc::new(hub.client())).await;
    let addr = provider.local_addr().expect("a started provider's address");
    (plain_client(addr).await, provider)
}

/// A stub through our consumer, or tonic's against our provider.
enum MeasuredClient {
    Ours(TestServiceClient<ReferenceChannel>),
    Plain(TestServiceClient<Channel>),
}

/// Runs `stack` alone on server streams of 1 000 messages of 100 B (see the module's
/// documentation) and prints its requests as `rpc_benches::profile` does.
async fn profiled(stack: &str, shapes: &[String], concurrency: usize, duration: Duration) {
    let (shape, size, messages) = SHAPES
        .into_iter()
        .find(|(s, _, _)| shapes.iter().any(|n| n == s.name()))
        .unwrap_or(SHAPES[0]);
    if stack == "plain" {
        let client = plain_client(plain_server().await).await;
        let calls = calls(client, "plain", shape, size, messages);
        return profile("plain", calls, concurrency, duration).await;
    }
    if stack == "rpc-server" {
        let (client, _provider) = plain_client_of_our_provider().await;
        let calls = calls(client, "rpc-server", shape, size, messages);
        return profile(stack, calls, concurrency, duration).await;
    }
    let hub = MemoryHub::new();
    let _provider = our_provider(Arc::new(hub.client())).await;
    let resumable = stack == "rpc-resumable";
    let (client, _consumer) = our_consumer(Arc::new(hub.client()), resumable).await;
    let calls = calls(client, "rpc", shape, size, messages);
    profile(stack, calls, concurrency, duration).await;
}

/// Exits 2 with `error` (an environment variable this bench cannot use).
fn usage(error: String) -> ! {
    eprintln!("streaming: {error}");
    std::process::exit(2)
}

fn size_name(size: usize) -> String {
    if size >= 1024 {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

#[tokio::main]
async fn main() {
    trace_as_in_production();
    let duration = Duration::from_millis(env_u64("STREAMING_MILLIS", 1_000));
    let rounds = env_u64("STREAMING_ROUNDS", 5) as usize;
    let concurrency = env_u64("STREAMING_CALLS", 4) as usize;
    let shapes = env_names(
        "STREAMING_SHAPES",
        &["server_stream", "client_stream", "ping_pong"],
    )
    .unwrap_or_else(|error| usage(error));
    let side = env_name("STREAMING_SIDE", &["both", "consumer", "provider"])
        .unwrap_or_else(|error| usage(error));
    if std::env::var_os("STREAMING_PROFILE").is_some() {
        let stack = env_name(
            "STREAMING_PROFILE",
            &["plain", "rpc", "rpc-resumable", "rpc-server"],
        )
        .unwrap_or_else(|error| usage(error));
        let millis = env_u64("STREAMING_PROFILE_MILLIS", 5_000);
        return profiled(&stack, &shapes, concurrency, Duration::from_millis(millis)).await;
    }
    let baseline = plain_client(plain_server().await).await;
    let (measured, _apps) = measured_client(&side).await;
    let mut lowest = f64::INFINITY;
    for (shape, size, messages) in SHAPES
        .into_iter()
        .filter(|(s, _, _)| shapes.iter().any(|n| n == s.name()))
    {
        let plain = calls(baseline.clone(), "plain", shape, size, messages);
        // One type for either client: the calls behind a shared pointer.
        let rpc: Arc<dyn Fn() -> BoxedCall + Send + Sync> = match &measured {
            MeasuredClient::Ours(client) => {
                Arc::new(calls(client.clone(), "rpc", shape, size, messages))
            }
            MeasuredClient::Plain(client) => {
                Arc::new(calls(client.clone(), "rpc", shape, size, messages))
            }
        };
        let rpc = move || rpc();
        // Warm both at this shape: windows, buffers, the allocator's pools.
        drive(plain.clone(), concurrency, duration / 2).await;
        drive(rpc.clone(), concurrency, duration / 2).await;
        let compared = compare(rpc, plain, concurrency, duration, rounds).await;
        let (qps_ratio, _, p99_ratio) = compared.ratios;
        lowest = lowest.min(qps_ratio);
        let per_second = |qps: f64| qps * messages as f64;
        println!(
            "streaming: shape={} size={} messages_per_call={messages} plain_msgs_s={:.0} rpc_msgs_s={:.0} rpc_mb_s={:.1} rpc_p99_us={} qps_ratio={qps_ratio:.3} p99_ratio={p99_ratio:.3}",
            shape.name(),
            size_name(size),
            per_second(compared.baseline.qps),
            per_second(compared.ours.qps),
            per_second(compared.ours.qps) * size as f64 / 1e6,
            compared.ours.p99_us,
        );
    }
    println!("streaming: min_qps_ratio={lowest:.3}");
}
