//! A reference's `timeout` bounds an attempt until its response head; a client stream's
//! head comes only once its caller has finished writing (tonic answers at half-close),
//! so for a request still being written the timeout counts from its end: an upload
//! longer than the timeout completes, whole (helper-20 found the default 3 s cutting
//! every longer upload, and the handler reading the cut upload as complete), and an
//! upload a provider never answers still ends at the timeout after it (helper-21 found
//! it waiting for ever when the timeout was not applied at all).

mod common;

use common::backend::Backend;

use std::time::Duration;

use bytes::Bytes;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::{Payload, StreamingInputCallRequest};
use rpc::config::RegistryConfig;
use rpc::registry::MemoryHub;
use rpc_testkit::interop::server;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

/// The reference's timeout, far shorter than the upload.
const TIMEOUT: Duration = Duration::from_millis(300);
/// Messages of the upload, one every [`PACE`]: 1.2 s in all.
const MESSAGES: usize = 12;
const PACE: Duration = Duration::from_millis(100);
const MESSAGE: usize = 64;
/// The test's own bound: a hang fails it.
const BOUND: Duration = Duration::from_secs(20);

/// A consumer whose reference has [`TIMEOUT`].
fn consumer_config() -> rpc::config::Config {
    let mut config = common::config("consumer");
    let mut reference = rpc::cluster::ReferenceConfig::default();
    reference.timeout = Some(TIMEOUT);
    config
        .consumer
        .references
        .insert("grpc.testing.TestService".to_owned(), reference);
    config
}

/// `count` messages on `sender`, one every [`PACE`].
fn feed(
    sender: mpsc::Sender<StreamingInputCallRequest>,
    count: usize,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for _ in 0..count {
            tokio::time::sleep(PACE).await;
            sender.send(message()).await.expect("the stream takes it");
        }
    })
}

fn message() -> StreamingInputCallRequest {
    StreamingInputCallRequest {
        payload: Some(Payload {
            r#type: 0,
            body: Bytes::from(vec![0u8; MESSAGE]),
        }),
        expect_compressed: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_longer_than_the_reference_timeout_completes_whole() {
    common::logs();
    let backend = Backend::Memory(MemoryHub::new());
    let mut builder = backend.builder(common::config("provider"));
    server::provide(&mut builder);
    let provider = builder.start().await.expect("provider starts");

    let mut builder = backend.builder(consumer_config());
    let mut client = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer = builder.start().await.expect("consumer starts");

    let (sender, receiver) = mpsc::channel(1);
    let feeder = feed(sender, MESSAGES);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_its_provider_never_answers_ends_at_the_timeout_after_it() {
    common::logs();
    // A provider that reads every upload to its end and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (uploaded, mut uploads) = mpsc::unbounded_channel();
    let silent = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut connection = h2::server::handshake(socket).await.unwrap();
        let mut unanswered = Vec::new();
        while let Some(Ok((request, respond))) = connection.accept().await {
            let uploaded = uploaded.clone();
            tokio::spawn(async move {
                let mut body = request.into_body();
                let mut bytes = 0;
                while let Some(Ok(chunk)) = body.data().await {
                    bytes += chunk.len();
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                let _ = uploaded.send(bytes);
            });
            unanswered.push(respond);
        }
    });

    let mut config = consumer_config();
    config.registries.insert(
        "default".to_owned(),
        RegistryConfig::new(format!("static://{addr}")),
    );
    let mut builder = rpc::Application::builder(config);
    let mut client = TestServiceClient::new(builder.reference("grpc.testing.TestService"));
    let consumer = builder.start().await.expect("consumer starts");

    // Written after the call began, so still being written when it is sent (a ready
    // one is complete at once, and bounded from the start).
    let (sender, receiver) = mpsc::channel(1);
    let feeder = feed(sender, 3);
    let upload = ReceiverStream::new(receiver);
    let status = timeout(BOUND, client.streaming_input_call(upload))
        .await
        .expect("the wait ends: the timeout counts once the upload has ended")
        .expect_err("no answer");
    feeder.await.expect("every message was sent");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let read = timeout(BOUND, uploads.recv())
        .await
        .expect("the provider read it");
    assert!(
        read.is_some_and(|bytes| bytes > 3 * MESSAGE),
        "the provider read the whole upload"
    );
    consumer.before_shutdown().await;
    silent.abort();
}
