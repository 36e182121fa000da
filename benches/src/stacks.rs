//! The echo stacks the benchmarks compare, each on loopback over one HTTP/2 connection:
//! plain tonic on both sides, the whole rpc stack on both sides (an `Application`
//! provider found through the in-process registry by an `Application` consumer), and
//! each side of ours against tonic's other side.

use std::net::SocketAddr;
use std::sync::Arc;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::cluster::ReferenceConfig;
use rpc::config::ServiceConfig;
use rpc::core::Compression;
use rpc::registry::{MemoryHub, StaticRegistry};
use rpc::{Application, Config};
use rpc_testkit::services::EchoProvider;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::transport::server::TcpIncoming;

/// The echo service's gRPC name.
const ECHO: &str = "echo.Echo";

/// The request every stack echoes: `OVERHEAD_PAYLOAD` bytes of payload (default 64,
/// at most 4 MiB less 64 bytes, under the default message limit with its framing), no
/// delay. The payload is made once and shared by every request.
pub fn request() -> EchoRequest {
    static PAYLOAD: std::sync::OnceLock<bytes::Bytes> = std::sync::OnceLock::new();
    let payload = PAYLOAD.get_or_init(|| {
        let size = crate::env_u64("OVERHEAD_PAYLOAD", 64).min(4 * 1024 * 1024 - 64);
        bytes::Bytes::from(vec![7u8; usize::try_from(size).unwrap_or(64)])
    });
    EchoRequest {
        payload: payload.clone(),
        delay_ms: None,
    }
}

/// A plain tonic echo server on `127.0.0.1:0` (TCP_NODELAY), serving until the
/// runtime ends; its address.
pub async fn plain_server() -> SocketAddr {
    plain_server_with(None).await
}

/// As [`plain_server`], reading requests compressed with `encoding` and compressing its
/// responses with it when the client accepts it (tonic's own compression).
pub async fn plain_server_with(encoding: Option<CompressionEncoding>) -> SocketAddr {
    let (addr, incoming) = loopback_incoming().await;
    let mut service = EchoServer::new(EchoProvider::default());
    if let Some(encoding) = encoding {
        service = service
            .accept_compressed(encoding)
            .send_compressed(encoding);
    }
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    addr
}

/// A listener on `127.0.0.1:0` for tonic's server (TCP_NODELAY on every connection);
/// its address.
pub async fn loopback_incoming() -> (SocketAddr, TcpIncoming) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    (addr, TcpIncoming::from(listener).with_nodelay(Some(true)))
}

/// A plain tonic client of `addr`, connected (TCP_NODELAY).
pub async fn plain_client(addr: SocketAddr) -> EchoClient<Channel> {
    plain_client_with(addr, None).await
}

/// As [`plain_client`], compressing its requests with `encoding` and accepting
/// responses compressed with it.
pub async fn plain_client_with(
    addr: SocketAddr,
    encoding: Option<CompressionEncoding>,
) -> EchoClient<Channel> {
    let client = EchoClient::new(plain_channel(addr).await);
    match encoding {
        Some(encoding) => client.send_compressed(encoding).accept_compressed(encoding),
        None => client,
    }
}

/// A tonic `Channel` to `addr`, connected (TCP_NODELAY).
pub async fn plain_channel(addr: SocketAddr) -> Channel {
    plain_endpoint(addr)
        .connect()
        .await
        .expect("connect to the plain server")
}

/// Tonic's `Endpoint` of `addr` (TCP_NODELAY), for a bench to set more on.
pub fn plain_endpoint(addr: SocketAddr) -> tonic::transport::Endpoint {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("an http URL")
        .tcp_nodelay(true)
}

/// A configuration for an application of the benchmarks: admin endpoint and signal
/// handling off, metrics and tracing on or off as `observed` says, and the provider's
/// adaptive concurrency limit (`provider.limit`, off by default) on when the
/// environment has `OVERHEAD_LIMIT=on`, `OVERHEAD_CONNECTIONS` connections per
/// instance (`consumer.connections_per_instance`, default 1), and the provider's
/// connection window (`protocol.initial_connection_window_size`, in bytes, default 8 MiB)
/// from `PROVIDER_CONNECTION_WINDOW` (1048576: hyper's and tonic's), and the consumer's
/// (`consumer.initial_connection_window_size`, default 256 MiB) from
/// `CONSUMER_CONNECTION_WINDOW` (5242880: tonic's channel's). A window variable that is
/// not a number of bytes the transport takes exits 2, naming it.
pub fn config(name: &str, observed: bool) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.graceful_shutdown.internal_signal = false;
    config.admin.enabled = false;
    config.metrics.enabled = observed;
    config.tracing.enabled = observed;
    config.provider.limit.enabled = std::env::var("OVERHEAD_LIMIT").is_ok_and(|v| v == "on");
    config.consumer.connections_per_instance = crate::env_u64("OVERHEAD_CONNECTIONS", 1) as usize;
    windows_from_env(&mut config).unwrap_or_else(|error| {
        eprintln!("{error}");
        std::process::exit(2)
    });
    config
}

/// The connection windows of `PROVIDER_CONNECTION_WINDOW` and `CONSUMER_CONNECTION_WINDOW`
/// set into `config`, checked as the transport checks them.
fn windows_from_env(config: &mut Config) -> Result<(), String> {
    if let Some(window) = env_window("PROVIDER_CONNECTION_WINDOW")? {
        config.protocol.initial_connection_window_size = window;
        (config.protocol.server_options().check())
            .map_err(|error| format!("PROVIDER_CONNECTION_WINDOW: {error}"))?;
    }
    if let Some(window) = env_window("CONSUMER_CONNECTION_WINDOW")? {
        config.consumer.initial_connection_window_size = window;
        (config.consumer.channel_options().check())
            .map_err(|error| format!("CONSUMER_CONNECTION_WINDOW: {error}"))?;
    }
    Ok(())
}

/// The window in environment variable `variable`, if it is set.
///
/// # Errors
/// Not a number of bytes, or one past what any window takes (2³¹ − 1), said with the
/// variable.
fn env_window(variable: &str) -> Result<Option<u32>, String> {
    let Some(bytes) = env_bytes::<u64>(variable)? else {
        return Ok(None);
    };
    let (min, max) = (
        rpc::transport::MIN_WINDOW_SIZE,
        rpc::transport::MAX_WINDOW_SIZE,
    );
    u32::try_from(bytes)
        .ok()
        .filter(|window| *window <= max)
        .map(Some)
        .ok_or_else(|| format!("{variable}: {bytes} is not from {min} to {max}"))
}

/// The number of bytes in environment variable `variable`, if it is set.
///
/// # Errors
/// A value that is not a whole number of bytes that fits in `T`, said with the variable.
fn env_bytes<T: TryFrom<u64>>(variable: &str) -> Result<Option<T>, String> {
    let Ok(value) = std::env::var(variable) else {
        return Ok(None);
    };
    (value.trim().parse::<u64>().ok())
        .and_then(|bytes| T::try_from(bytes).ok())
        .map(Some)
        .ok_or_else(|| format!("{variable} takes a number of bytes, not `{value}`"))
}

/// The echo reference's `max_replay_bytes` from `CONSUMER_MAX_REPLAY_BYTES` (0: a
/// request is never kept for a retry, as plain tonic keeps none), if it is set; exits 2
/// naming the variable when it is not a number of bytes. Read by the benches that call
/// the echo service through [`ours`] or [`ours_with`] (`message_size`, `overhead`, …),
/// not by `streaming`, whose server streams' requests are small.
fn replay_from_env(reference: &mut ReferenceConfig) {
    match env_bytes("CONSUMER_MAX_REPLAY_BYTES") {
        Ok(Some(bytes)) => reference.max_replay_bytes = bytes,
        Ok(None) => {}
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(2)
        }
    }
}

/// An `Application` provider of the echo service, registered in `hub`.
pub async fn our_provider(hub: &MemoryHub, observed: bool) -> Application {
    provider_of(hub, config("provider", observed)).await
}

/// An `Application` provider of the echo service configured by `config`, registered in
/// `hub`.
async fn provider_of(hub: &MemoryHub, config: Config) -> Application {
    let mut provider = Application::builder(config);
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    provider.start().await.expect("the provider starts")
}

/// A provider and a consumer on an in-process registry, with metrics and tracing on or
/// off on both; the consumer's stub and both applications (consumer first).
pub async fn ours(observed: bool) -> (EchoClient<rpc::ReferenceChannel>, Vec<Application>) {
    ours_with(observed, Compression::None).await
}

/// As [`ours`], with the echo service's responses (`provider.services.echo.Echo.compression`)
/// and the reference's requests (`consumer.references.echo.Echo.compression`)
/// compressed with `compression`: rpc's own compression filters, from configuration.
pub async fn ours_with(
    observed: bool,
    compression: Compression,
) -> (EchoClient<rpc::ReferenceChannel>, Vec<Application>) {
    let hub = MemoryHub::new();
    let provider = provider_of(
        &hub,
        compressed_service(config("provider", observed), compression),
    )
    .await;
    let mut consumer = Application::builder(compressed_reference(
        config("consumer", observed),
        compression,
    ));
    consumer.registry("default", Arc::new(hub.client()));
    let client = EchoClient::new(consumer.reference(ECHO));
    let consumer = consumer.start().await.expect("the consumer starts");
    (client, vec![consumer, provider])
}

/// A provider's `config` with the echo service's responses compressed with
/// `compression`.
fn compressed_service(mut config: Config, compression: Compression) -> Config {
    let mut service = ServiceConfig::default();
    service.compression = compression;
    config.provider.services.insert(ECHO.to_owned(), service);
    config
}

/// A consumer's `config` with the echo reference's requests compressed with
/// `compression`.
fn compressed_reference(mut config: Config, compression: Compression) -> Config {
    let mut reference = ReferenceConfig::default();
    reference.compression = compression;
    replay_from_env(&mut reference);
    config
        .consumer
        .references
        .insert(ECHO.to_owned(), reference);
    config
}

/// Our consumer (the default stack, metrics and tracing on) over the instances at
/// `addrs`, given by a static registry; its stub and its application.
pub async fn our_consumer_of(
    addrs: &[SocketAddr],
) -> (EchoClient<rpc::ReferenceChannel>, Application) {
    our_consumer_with(config("consumer", true), addrs).await
}

/// As [`our_consumer_of`], configured by `config` (the echo reference's settings under
/// `consumer.references.echo.Echo`).
pub async fn our_consumer_with(
    config: Config,
    addrs: &[SocketAddr],
) -> (EchoClient<rpc::ReferenceChannel>, Application) {
    let mut builder = Application::builder(config);
    let addresses = addrs
        .iter()
        .map(|addr| (addr.ip().to_string(), addr.port()))
        .collect();
    builder.registry("default", Arc::new(StaticRegistry::new(addresses)));
    let client = EchoClient::new(builder.reference(ECHO));
    let app = builder.start().await.expect("the consumer starts");
    (client, app)
}

/// Calls of `client`'s echo, one per invocation, boxed so that the stacks a bench
/// compares share one type; a failed echo panics with "`name` echo succeeds".
pub fn echo_calls<T>(
    client: EchoClient<T>,
    name: &'static str,
) -> impl Fn() -> crate::BoxedCall + Clone + Send + 'static
where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    T::Future: Send,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    echo_calls_of(client, name, request(), None)
}

/// Calls of `client`'s echo with `echoed` (its payload shared, not copied, per call),
/// each reply's provider noted in `shares` when given; a failed echo, or a reply whose
/// payload is not the request's length, panics naming `name`.
pub fn echo_calls_of<T>(
    client: EchoClient<T>,
    name: &'static str,
    echoed: EchoRequest,
    shares: Option<std::sync::Arc<crate::shares::ProviderShares>>,
) -> impl Fn() -> crate::BoxedCall + Clone + Send + 'static
where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    T::Future: Send,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    move || -> crate::BoxedCall {
        let mut client = client.clone();
        let shares = shares.clone();
        let echoed = echoed.clone();
        Box::pin(async move {
            let sent = echoed.payload.len();
            match client.echo(echoed).await {
                Ok(reply) => {
                    let reply = reply.into_inner();
                    assert_eq!(reply.payload.len(), sent, "{name} echo returns the payload");
                    if let Some(shares) = shares {
                        shares.note(&reply.provider);
                    }
                }
                Err(status) => panic!("{name} echo succeeds: {status}"),
            }
        })
    }
}
