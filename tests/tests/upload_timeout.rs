//! A reference's `timeout` bounds an attempt until its response head; a client stream's
//! head comes only once its caller has finished writing (tonic answers at half-close),
//! so the timeout does not apply to a request still being written: an upload longer
//! than the timeout completes, whole (helper-20 found the default 3 s cutting every
//! longer upload, and the handler reading the cut upload as complete).

mod common;

use common::backend::Backend;

use std::time::Duration;

use bytes::Bytes;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::{Payload, StreamingInputCallRequest};
use rpc::registry::MemoryHub;
use rpc_testkit::interop::server;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_stream::wrappers::ReceiverStream;

/// The reference's timeout, far shorter than the upload.
const TIMEOUT: Duration = Duration::from_millis(300);
/// Messages of the upload, one every [`PACE`]: 1.2 s in all.
const MESSAGES: usize = 12;
const PACE: Duration = Duration::from_millis(100);
const MESSAGE: usize = 64;
/// The test's own bound: a hang fails it.
const BOUND: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_longer_than_the_reference_timeout_completes_whole() {
    common::logs();
    let backend = Backend::Memory(MemoryHub::new());
    let mut builder = backend.builder(common::config("provider"));
    server::provide(&mut builder);
    let provider = builder.start().await.expect("provider starts");

    let mut config = common::config("consumer");
    let mut reference = rpc::cluster::ReferenceConfig::default();
    reference.timeout = Some(TIMEOUT);
    config
        .consumer
        .references
        .insert("grpc.testing.TestService".to_owned(), reference);
    let mut builder = backend.builder(config);
    let mut client = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer = builder.start().await.expect("consumer starts");

    let (sender, receiver) = mpsc::channel(1);
    let feeder = tokio::spawn(async move {
        for _ in 0..MESSAGES {
            tokio::time::sleep(PACE).await;
            let message = StreamingInputCallRequest {
                payload: Some(Payload {
                    r#type: 0,
                    body: Bytes::from(vec![0u8; MESSAGE]),
                }),
                expect_compressed: None,
            };
            sender.send(message).await.expect("the stream takes it");
        }
    });
    let response = timeout(
        BOUND,
        client.streaming_input_call(ReceiverStream::new(receiver)),
    )
    .await
    .expect("no hang")
    .expect("the upload is answered, not cut at the timeout");
    feeder.await.expect("every message was sent");
    assert_eq!(
        response.into_inner().aggregated_payload_size,
        i32::try_from(MESSAGES * MESSAGE).unwrap(),
        "the handler read the whole upload"
    );
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}
