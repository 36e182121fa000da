//! A tower layer of the application's own on each side (`examples/src/bearer_auth.rs`):
//! the provider's answers `UNAUTHENTICATED` without running the handler, the consumer's
//! adds the token to every call; the provider's layer sits inside the metrics, so what
//! it refuses is counted with its status like any other call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lossless_rpc::registry::MemoryHub;
use lossless_rpc::{Application, ApplicationBuilder, Config};
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::{Greeter, GreeterServer};
use proto::greeter::{HelloReply, HelloRequest};
use rpc_examples::bearer_auth::{AddBearer, RequireBearer};
use tower::Layer;

/// A greeter that counts the calls that reached it.
#[derive(Clone, Default)]
struct Counted(Arc<AtomicUsize>);

#[tonic::async_trait]
impl Greeter for Counted {
    async fn say_hello(
        &self,
        request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, tonic::Status> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(tonic::Response::new(HelloReply {
            message: format!("Hello, {}!", request.into_inner().name),
            provider: String::new(),
        }))
    }

    type SayHelloStreamStream =
        futures_util::stream::BoxStream<'static, Result<HelloReply, tonic::Status>>;

    async fn say_hello_stream(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<Self::SayHelloStreamStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("not in this test"))
    }
}

fn builder(name: &str, hub: &MemoryHub) -> ApplicationBuilder {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.application.logging = false;
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    let mut builder = Application::builder(config);
    builder.registry("default", Arc::new(hub.client_with_delay(Duration::ZERO)));
    builder
}

fn hello() -> HelloRequest {
    HelloRequest {
        name: "layers".to_owned(),
        count: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_own_layer_refuses_without_a_token_and_a_consumers_adds_it() {
    let hub = MemoryHub::new();
    let greeter = Counted::default();
    let mut provider = builder("provider", &hub);
    provider.service(GreeterServer::new(greeter.clone()));
    provider.provider_layer(RequireBearer::new("s3cret"));
    let provider = provider.start().await.expect("the provider starts");

    let mut consumer = builder("consumer", &hub);
    let mut plain = GreeterClient::new(consumer.reference("helloworld.Greeter"));
    let mut with_token = GreeterClient::new(
        AddBearer::new("s3cret").layer(consumer.reference("helloworld.Greeter")),
    );
    let consumer = consumer.start().await.expect("the consumer starts");

    let refused = plain.say_hello(hello()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
    assert_eq!(
        greeter.0.load(Ordering::SeqCst),
        0,
        "the handler did not run"
    );

    let reply = with_token
        .say_hello(hello())
        .await
        .expect("the token opens it");
    assert_eq!(reply.into_inner().message, "Hello, layers!");
    assert_eq!(greeter.0.load(Ordering::SeqCst), 1);

    // Inside the provider's metrics: the refusal is a call with its status.
    let text = provider.metrics().encode();
    for code in ["16", "0"] {
        let series = format!(
            "rpc_server_call_duration_seconds_count{{rpc_system=\"grpc\",rpc_service=\"helloworld.Greeter\",rpc_method=\"SayHello\",rpc_grpc_status_code=\"{code}\"}} 1"
        );
        assert!(text.contains(&series), "{series} in {text}");
    }
    consumer.before_shutdown().await;
    let report = provider.before_shutdown().await;
    assert_eq!(report.exit_code(), 0, "{report}");
}
