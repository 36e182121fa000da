//! The interop client: references to `TestService` and `UnimplementedService` through
//! an `rpc` consumer, so every case goes through the cluster (directory, load balance,
//! failover, consumer filters) as application calls do.

use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use proto::interop::test_service_client::TestServiceClient;
use proto::interop::unimplemented_service_client::UnimplementedServiceClient;
use rpc::config::RegistryConfig;
use rpc::core::BoxError;
use rpc::{Application, ApplicationBuilder, ApplicationError, Config, ReferenceChannel};
use tonic::body::Body as TonicBody;
use tower::Service;

use super::message_flags::{FlagsBody, MessageFlags};

/// Generated clients over references to the interop services; run a case on it with
/// [`procedures::run`](super::procedures::run).
#[derive(Clone, Debug)]
pub struct InteropClient {
    pub(super) test: TestServiceClient<Observed>,
    pub(super) unimplemented: UnimplementedServiceClient<ReferenceChannel>,
    /// The compressed flags of the messages of the last response of `test`.
    pub(super) response_flags: MessageFlags,
}

impl InteropClient {
    /// Adds references to `grpc.testing.TestService` and
    /// `grpc.testing.UnimplementedService` to `builder` (usable once it has started).
    pub fn reference(builder: &mut ApplicationBuilder) -> Self {
        let response_flags = MessageFlags::new();
        let test = Observed {
            inner: builder.reference("grpc.testing.TestService"),
            flags: response_flags.clone(),
        };
        Self {
            test: TestServiceClient::new(test),
            unimplemented: UnimplementedServiceClient::new(
                builder.reference("grpc.testing.UnimplementedService"),
            ),
            response_flags,
        }
    }
}

/// The configuration of an interop client application whose references find providers
/// in the registry at `registry_url`: `static://host:port` for the spec's
/// `--server_host` / `--server_port`, or any registry `rpc` supports.
pub fn client_config(registry_url: &str) -> Config {
    let mut config = Config::default();
    config.application.name = "interop-client".to_owned();
    config.registries.insert(
        "default".to_owned(),
        RegistryConfig::new(registry_url.to_owned()),
    );
    // Like the Python client, every call may wait 10 s for its response (the default
    // 3 s is short for a 300 KB exchange on a loaded 2-core machine); the cases that
    // test deadlines set their own.
    for service in [
        "grpc.testing.TestService",
        "grpc.testing.UnimplementedService",
    ] {
        config
            .consumer
            .references
            .entry(service.to_owned())
            .or_default()
            .timeout = Some(Duration::from_secs(10));
    }
    // The client stops itself once its cases ran; nobody calls it, so its offline
    // window can be short.
    config.graceful_shutdown.internal_signal = false;
    config.graceful_shutdown.offline_request_window_timeout = Duration::from_millis(10);
    // A client that runs its cases and exits has nothing to tell an operator.
    config.admin.enabled = false;
    config
}

/// Starts a consumer with `config` and returns it with its interop client.
///
/// # Errors
/// [`ApplicationError`] when the registry cannot be reached or no provider is found
/// within `consumer.check_timeout`.
pub async fn connect(config: Config) -> Result<(Application, InteropClient), ApplicationError> {
    let mut builder = Application::builder(config);
    let client = InteropClient::reference(&mut builder);
    let app = builder.start().await?;
    Ok((app, client))
}

/// A reference that records the compressed flag of every message of each response
/// (the `CompressedResponse` cases check it; tonic decompresses before the caller sees
/// a message). The record is cleared at the start of each call.
#[derive(Clone, Debug)]
pub struct Observed {
    inner: ReferenceChannel,
    flags: MessageFlags,
}

impl Service<http::Request<TonicBody>> for Observed {
    type Response = http::Response<TonicBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<http::Response<TonicBody>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<TonicBody>) -> Self::Future {
        self.flags.clear();
        let flags = self.flags.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| TonicBody::new(FlagsBody::new(body, flags))))
        })
    }
}
