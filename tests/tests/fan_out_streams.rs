//! Forking and broadcast with a client stream: each fork needs the whole request, so a
//! stream ready whole when the call begins (up to `max_replay_bytes`) goes to every
//! fork, while one still being written can be given to one attempt only. Before, every
//! fork but the last was cut (each new attempt fences off the ones before it): a
//! broadcast of such a stream failed with "connection failed after the request was
//! sent (it may have run): … stream no longer needed", and forking opened streams it cut.
//! Now forking sends it to one instance and broadcast refuses it before sending anything.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::backend::Backend;
use futures_util::StreamExt as _;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::{Payload, SimpleRequest, StreamingInputCallRequest};
use rpc::Application;
use rpc::cluster::{ClusterKind, ReferenceConfig};
use rpc::registry::MemoryHub;
use rpc_testkit::interop::server;
use rpc_testkit::interop::service::{InteropService, Method};
use tonic::Code;

const SERVICE: &str = "grpc.testing.TestService";
/// The test's own bound on every wait.
const BOUND: Duration = Duration::from_secs(10);

fn message() -> StreamingInputCallRequest {
    StreamingInputCallRequest {
        payload: Some(Payload {
            r#type: 0,
            body: Bytes::from(vec![0u8; 64]),
        }),
        expect_compressed: None,
    }
}

/// Two interop providers and a consumer whose reference uses `cluster`; the providers'
/// services (to count the calls their handlers took) and the applications.
async fn fleet(
    cluster: ClusterKind,
) -> (
    TestServiceClient<rpc::ReferenceChannel>,
    Vec<InteropService>,
    Vec<Application>,
) {
    fleet_keeping(cluster, ReferenceConfig::default().max_replay_bytes).await
}

/// As [`fleet`], the reference keeping requests up to `max_replay_bytes`.
async fn fleet_keeping(
    cluster: ClusterKind,
    max_replay_bytes: usize,
) -> (
    TestServiceClient<rpc::ReferenceChannel>,
    Vec<InteropService>,
    Vec<Application>,
) {
    let backend = Backend::Memory(MemoryHub::new());
    let (mut services, mut apps) = (Vec::new(), Vec::new());
    for n in 0..2 {
        let mut builder = backend.builder(common::config(&format!("provider-{n}")));
        services.push(server::provide(&mut builder));
        apps.push(builder.start().await.expect("provider starts"));
    }
    let mut config = common::config("consumer");
    let mut reference = ReferenceConfig::default();
    reference.cluster = cluster;
    reference.max_replay_bytes = max_replay_bytes;
    config
        .consumer
        .references
        .insert(SERVICE.to_owned(), reference);
    let mut builder = backend.builder(config);
    let client = TestServiceClient::new(builder.reference(SERVICE));
    apps.push(builder.start().await.expect("consumer starts"));
    (client, services, apps)
}

/// Client-stream calls the handlers of `services` took.
fn uploads(services: &[InteropService]) -> usize {
    taken(services, Method::StreamingInput)
}

/// Calls of `method` the handlers of `services` took.
fn taken(services: &[InteropService], method: Method) -> usize {
    services
        .iter()
        .map(|service| service.calls().get(method))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ready_whole_goes_to_every_instance_of_a_broadcast() {
    common::logs();
    let (mut client, services, _apps) = fleet(ClusterKind::Broadcast).await;
    let ready = futures_util::stream::iter((0..3).map(|_| message()));
    let answer = tokio::time::timeout(BOUND, client.streaming_input_call(ready))
        .await
        .expect("no hang")
        .expect("the broadcast is answered");
    assert_eq!(answer.into_inner().aggregated_payload_size, 3 * 64);
    assert_eq!(uploads(&services), 2, "both instances took the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_still_being_written_is_forked_to_one_instance() {
    common::logs();
    let (mut client, services, _apps) = fleet(ClusterKind::Forking).await;
    // The stream's end waits until a handler has its first message: it cannot be
    // complete when the call begins.
    let (first, gate) = tokio::sync::oneshot::channel::<()>();
    let counted = services.clone();
    let opener = tokio::spawn(async move {
        let taken = async {
            while uploads(&counted) == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(BOUND, taken)
            .await
            .expect("a handler takes the stream");
        let _ = first.send(());
    });
    let stream = futures_util::stream::iter((0..3).map(|_| message()))
        .chain(futures_util::stream::once(gate).filter_map(|_| async { None }));
    let answer = tokio::time::timeout(BOUND, client.streaming_input_call(stream))
        .await
        .expect("no hang")
        .expect("the fork that has the stream answers");
    opener.await.expect("the opener ends");
    assert_eq!(answer.into_inner().aggregated_payload_size, 3 * 64);
    assert_eq!(uploads(&services), 1, "one instance, no fork cut halfway");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_refuses_a_stream_still_being_written_before_sending_it() {
    common::logs();
    let (mut client, services, _apps) = fleet(ClusterKind::Broadcast).await;
    let stream = futures_util::stream::iter((0..3).map(|_| message()))
        .chain(futures_util::stream::pending());
    let status = tokio::time::timeout(BOUND, client.streaming_input_call(stream))
        .await
        .expect("no hang")
        .expect_err("refused");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(
        status.message().contains("max_replay_bytes")
            && status.message().contains("nothing was sent"),
        "{status:?}"
    );
    assert_eq!(uploads(&services), 0, "no instance took it");
}

/// helper-25's find: a unary request larger than `max_replay_bytes` is not kept either,
/// so it takes the same path: one instance under forking, refused by broadcast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_request_past_max_replay_bytes_is_forked_to_one_and_refused_by_broadcast() {
    common::logs();
    let request = || SimpleRequest {
        payload: Some(Payload {
            r#type: 0,
            body: Bytes::from(vec![0u8; 2048]),
        }),
        ..SimpleRequest::default()
    };
    let (mut client, services, _apps) = fleet_keeping(ClusterKind::Forking, 1024).await;
    tokio::time::timeout(BOUND, client.unary_call(request()))
        .await
        .expect("no hang")
        .expect("the fork that has the request answers");
    assert_eq!(taken(&services, Method::Unary), 1, "one instance");

    let (mut client, services, _apps) = fleet_keeping(ClusterKind::Broadcast, 1024).await;
    let status = tokio::time::timeout(BOUND, client.unary_call(request()))
        .await
        .expect("no hang")
        .expect_err("refused");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("1024 bytes"), "{status:?}");
    assert_eq!(taken(&services, Method::Unary), 0, "no instance took it");
}
