//! # lossless-rpc
//!
//! A Rust gRPC framework whose reason to exist is **lossless online/offline**: any
//! instance of a service can be started, stopped, scaled or upgraded in place under full
//! load, and no request fails because of it.
//!
//! Application code depends on this crate alone. It uses the stubs `tonic-build`
//! generates, unchanged:
//!
//! ```no_run
//! use lossless_rpc::{Application, Config};
//! # async fn demo() -> Result<i32, Box<dyn std::error::Error>> {
//! let config = Config::from_file("provider.yaml")?;
//! let mut builder = Application::builder(config);
//! // Consumer: a generated client over a reference.
//! // let greeter = GreeterClient::new(builder.reference("helloworld.Greeter"));
//! // Provider: a generated server.
//! // builder.service(GreeterServer::new(MyGreeter));
//! let app = builder.start().await?;
//! let exit_code = app.wait().await.exit_code(); // main exits with it
//! # Ok(exit_code)
//! # }
//! ```
//!
//! Start-up subscribes references, binds listeners, runs readiness gates and only then
//! registers. SIGTERM (or [`Application::before_shutdown`]) runs the seven-step graceful
//! shutdown: unregister, wait for consumers, reject new requests as retryable, drain
//! inbound, drain outbound, close protocols, run callbacks. Under systemd (`Type=notify`)
//! every application reports its phases to the service manager (see [`systemd`]).
//! Every application also answers on its [`admin`] endpoint (loopback port 22222 by
//! default): probes, manual offline/online, status, a status page.
//!
//! SIGUSR2 (or [`Application::upgrade`]) replaces the binary in place: the new one
//! starts on the same listening socket, registers the same instances, and only then
//! does the old one stop accepting, drain and exit (see [`upgrade`]).
//!
//! Every call is timed into Prometheus histograms and traced with a `tracing` span on
//! both sides; [`Application::metrics`] gives the application's metrics, whose
//! [`Metrics::encode`] is the text `GET /metrics` serves (see [`observe`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
mod application;
pub mod config;
pub mod observe;
pub mod stream;
pub mod systemd;
pub mod upgrade;

pub use application::{Application, ApplicationBuilder, ApplicationError, ProviderService};
pub use config::{Config, ConfigError, ConfigFormat};
pub use observe::{Metrics, ReferenceChannel};
pub use rpc_cluster::ClusterError;
pub use rpc_core::{
    CallContext, Instance, RegistryError, RpcConventions, ServiceKey, Unreachability,
};
pub use rpc_lifecycle::{
    Interrupt, Lifecycle, Phase, ShutdownConfig, ShutdownReport, StartError, Step, StepOutcome,
    UpgradeConfig, UpgradeReport,
};

/// The HTTP types a provider layer sees (`lossless_rpc::http::Request`, `Response`,
/// `HeaderValue`), re-exported so that a layer of one's own
/// ([`ApplicationBuilder::provider_layer`]) needs no `http` dependency of its own, at
/// the very version `lossless-rpc` uses.
pub use http;
/// The protobuf runtime of the generated messages, re-exported for the same reason as
/// [`tonic`].
pub use prost;
/// The gRPC library the framework is built on, re-exported so that generated stubs and
/// the application use the very version `lossless-rpc` does
/// (`lossless_rpc::tonic::Request`, ...). The code `tonic-prost-build` generates names
/// the crates `tonic`, `tonic_prost` and `prost` directly, so a user's Cargo.toml still
/// lists them (the versions in docs/getting-started.md).
pub use tonic;
/// The service and layer traits ([`tower::Layer`], [`tower::Service`]) a provider layer or
/// a consumer's wrapper implements, re-exported for the same reason as [`http`].
pub use tower;

/// The cluster layer: directory, blacklist, load balancing, strategies.
pub use rpc_cluster as cluster;
/// The core vocabulary: service keys, instances, the `Registry` trait, phases, counters.
pub use rpc_core as core;
/// The tower filters.
pub use rpc_filter as filter;
/// The lifecycle: start order, the shutdown sequence, the hot upgrade.
pub use rpc_lifecycle as lifecycle;
/// Registry backends and [`connect`](rpc_registry::connect).
pub use rpc_registry as registry;
/// The HTTP/2 transport: server, listener inheritance, TLS, the consumer's connection.
pub use rpc_transport as transport;
