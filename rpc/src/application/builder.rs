//! Collecting services, references, gates and hooks before start-up.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use rpc_cluster::loadbalance::{LoadBalance, LoadBalances, UnknownLoadBalance};
use rpc_cluster::resume::{ResumableMethods, ResumeRule, SameRequest, StreamResumeLayer};
use rpc_cluster::{ClusterChannel, Directory};
use rpc_core::{BoxError, Registry, ServiceKey};
use rpc_filter::access_log::{AccessLogLayer, AccessLogSink};
use rpc_filter::compression::ConsumerCompressionLayer;
use rpc_filter::graceful::ConsumerGracefulLayer;
use rpc_filter::trace::Side;
use rpc_lifecycle::Lifecycle;
use rpc_lifecycle::ReadinessGate;
use rpc_transport::ServiceRoutes;
use rpc_transport::{ChannelOptions, ServerOptions};
use tonic::body::Body as TonicBody;
use tonic::server::NamedService;
use tower_layer::Layer;

use crate::config::Config;

use super::provider_layers::{self, ProviderLayerFn, ProviderService};
use crate::observe::{self, Metrics, ReferenceChannel};
use crate::upgrade::UpgradeStart;

/// Collects services, references and hooks, then starts them in order.
///
/// ```no_run
/// # use lossless_rpc::{Application, Config};
/// # async fn demo() -> Result<i32, lossless_rpc::ApplicationError> {
/// let mut builder = Application::builder(Config::default());
/// // let client = GreeterClient::new(builder.reference("helloworld.Greeter"));
/// // builder.service(GreeterServer::new(MyGreeter));
/// let app = builder.start().await?;
/// let report = app.wait().await; // until SIGTERM/SIGINT ran the shutdown sequence
/// Ok(report.exit_code()) // main exits with this code
/// # }
/// ```
pub struct ApplicationBuilder {
    pub(super) config: Config,
    pub(super) lifecycle: Lifecycle,
    pub(super) registries: BTreeMap<String, Arc<dyn Registry>>,
    pub(super) routes: ServiceRoutes,
    pub(super) services: Vec<ServiceKey>,
    pub(super) references: Vec<(ClusterChannel, bool)>,
    pub(super) gates: Vec<ReadinessGate>,
    pub(super) channel_options: ChannelOptions,
    pub(super) server_options: ServerOptions,
    pub(super) metrics: Metrics,
    /// The load balances a reference may name: the built-in ones and the application's.
    pub(super) load_balances: LoadBalances,
    /// References whose `loadbalance` names nothing registered, by interface: start-up
    /// fails on the first, naming its key.
    pub(super) unknown_load_balances: Vec<(String, UnknownLoadBalance)>,
    /// Where the access log goes (`access_log.enabled`); the error opening it, with its
    /// key, fails start-up.
    pub(super) access_log: Result<Option<AccessLogSink>, crate::config::ConfigError>,
    /// The application's own layers around the provided services, first added
    /// outermost.
    pub(super) provider_layers: Vec<ProviderLayerFn>,
    /// This process's role in a hot upgrade and its own program, read now (start-up).
    pub(super) upgrade: UpgradeStart,
    /// The encoded `FileDescriptorSet`s gRPC server reflection serves
    /// (`provider.reflection`).
    pub(super) descriptor_sets: Vec<&'static [u8]>,
    /// The references' resumable methods (configuration and [`Self::resume_rule`]).
    pub(super) resumable: ResumableMethods,
}

impl ApplicationBuilder {
    pub(super) fn new(config: Config) -> Self {
        let lifecycle = Lifecycle::new(
            config.application.name.clone(),
            config.graceful_shutdown.clone(),
        );
        let metrics = Metrics::new(
            &config.metrics,
            &lifecycle,
            config.tracing.semantic_conventions(),
        );
        let access_log = open_access_log(&config);
        Self {
            access_log,
            server_options: config.protocol.server_options(),
            channel_options: config.consumer.channel_options(),
            config,
            lifecycle,
            metrics,
            registries: BTreeMap::new(),
            routes: ServiceRoutes::default(),
            services: Vec::new(),
            references: Vec::new(),
            gates: Vec::new(),
            load_balances: LoadBalances::default(),
            unknown_load_balances: Vec::new(),
            provider_layers: Vec::new(),
            upgrade: UpgradeStart::read(),
            descriptor_sets: Vec::new(),
            resumable: ResumableMethods::default(),
        }
    }

    /// The lifecycle the application will run under (available before start, e.g. to
    /// watch phases or to let a service's handler see the phase).
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// The application's metrics (see [`Metrics`]), kept from the first call on.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Uses `registry` as the registry called `name`, instead of building one from the
    /// configured URL (e.g. a [`MemoryRegistry`](crate::registry::MemoryRegistry) client
    /// with a propagation delay).
    pub fn registry(&mut self, name: impl Into<String>, registry: Arc<dyn Registry>) -> &mut Self {
        self.registries.insert(name.into(), registry);
        self
    }

    /// Provides `service` (a tonic-generated `*Server`, unchanged). Its registration
    /// settings come from `provider.services.<name>`.
    ///
    /// Its messages are limited by `protocol.max_decoding_message_size` and
    /// `max_encoding_message_size` (default 4 MiB each). The generated server keeps its
    /// own decoding limit too (tonic's default, 4 MiB): to accept larger requests, raise
    /// both, e.g. `GreeterServer::new(greeter).max_decoding_message_size(usize::MAX)`.
    pub fn service<S>(&mut self, service: S) -> &mut Self
    where
        S: tower::Service<
                http::Request<TonicBody>,
                Response = http::Response<TonicBody>,
                Error = Infallible,
            > + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let settings = self
            .config
            .provider
            .services
            .get(S::NAME)
            .cloned()
            .unwrap_or_default();
        self.services.push(
            ServiceKey::new(S::NAME)
                .with_group(settings.group)
                .with_version(settings.version),
        );
        self.routes.add_service(service);
        self
    }

    /// Registers the encoded `FileDescriptorSet` of the application's services, which
    /// gRPC server reflection serves when `provider.reflection` is true (`grpcurl list`,
    /// `grpcurl describe helloworld.Greeter`). tonic-prost-build writes it
    /// (`configure().file_descriptor_set_path(out_dir.join("descriptors.bin"))` in
    /// `build.rs`), and `tonic::include_file_descriptor_set!("descriptors")` includes
    /// it. Call it once per set (one per crate of stubs, say); the health service's
    /// descriptors are rpc's to add. Reflection lists the services this application
    /// provides, described by these sets; with `provider.reflection` true and no set
    /// registered, start-up fails naming the key.
    pub fn file_descriptor_set(&mut self, set: &'static [u8]) -> &mut Self {
        self.descriptor_sets.push(set);
        self
    }

    /// Registers a load balance of the application's own under `name`, for references
    /// whose `loadbalance` names it (`consumer.references.<interface>.loadbalance: name`).
    /// The built-in ones (`p2c`, `random`, `round_robin`, `least_active`,
    /// `consistent_hash`) are registered the same way; registering one of their names
    /// replaces it. `factory` builds one load balance per reference. Register before
    /// [`ApplicationBuilder::reference`]: a reference resolves its name when it is built.
    pub fn load_balance(
        &mut self,
        name: impl Into<String>,
        factory: impl Fn() -> Arc<dyn LoadBalance> + Send + Sync + 'static,
    ) -> &mut Self {
        self.load_balances.register(name, factory);
        self
    }

    /// Adds a tower layer of the application's own around every provided service, as
    /// tonic's `Server::builder().layer()` does: an authentication check, a quota, a
    /// header the handlers need. Its service takes and returns what tonic's routes do
    /// ([`ProviderService`]); an error it returns is answered as the gRPC status of that
    /// error (`tonic::Status::from_error`).
    ///
    /// Where it sits, from the connection inwards: the transport (call bounds, message
    /// sizes are checked inside: see below) → metrics → trace span → graceful filter
    /// (closing mark, closing refusal, in-flight count) → concurrency limit → **message
    /// size limits → the application's layers, the first added outermost** → the
    /// generated server. So a layer sees only calls that were admitted (not a refusal
    /// of a closing or overloaded provider), inside the call's span, counted in its
    /// duration and in flight until its response ends; what it answers itself (say
    /// `UNAUTHENTICATED`) is counted and traced like any other status. The gRPC health
    /// service is behind the layers too.
    ///
    /// For a reference, wrap the channel itself: `MyLayer.layer(builder.reference(..))`
    /// goes outside the consumer's filters (metrics → trace → graceful → cluster), so
    /// what it adds (a token header) reaches every attempt.
    pub fn provider_layer<L>(&mut self, layer: L) -> &mut Self
    where
        L: Layer<ProviderService> + Send + Sync + 'static,
        L::Service: tower::Service<http::Request<TonicBody>, Response = http::Response<TonicBody>>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as tower::Service<http::Request<TonicBody>>>::Error: Into<BoxError>,
        <L::Service as tower::Service<http::Request<TonicBody>>>::Future: Send + 'static,
    {
        self.provider_layers.push(provider_layers::boxed(layer));
        self
    }

    /// A reference to the service `interface` (e.g. `helloworld.Greeter`), configured by
    /// `consumer.references.<interface>`. Its `loadbalance` must name a registered load
    /// balance ([`ApplicationBuilder::load_balance`]), or start-up fails naming the key. Wrap it in the generated client:
    /// `GreeterClient::new(builder.reference("helloworld.Greeter"))`. Calls made before
    /// start-up find no provider.
    pub fn reference(&mut self, interface: &str) -> ReferenceChannel {
        let consumer = &self.config.consumer;
        let config = consumer
            .references
            .get(interface)
            .cloned()
            .unwrap_or_default();
        let key = ServiceKey::new(interface)
            .with_group(&config.group)
            .with_version(&config.version);
        let check = config.check.unwrap_or(consumer.check);
        let directory = Arc::new(Directory::new(
            key,
            consumer.directory.clone(),
            self.channel_options.clone(),
        ));
        let load_balance = match self.load_balances.build(&config.loadbalance) {
            Ok(load_balance) => load_balance,
            Err(unknown) => {
                // Start-up fails on it (naming the key); until then the reference picks
                // with the default, so nothing panics.
                self.unknown_load_balances
                    .push((interface.to_owned(), unknown));
                Arc::new(rpc_cluster::loadbalance::P2c)
            }
        };
        for (method, settings) in &config.methods {
            if settings.resumable {
                let path = format!("/{interface}/{method}");
                self.resumable.insert_if_absent(path, Arc::new(SameRequest));
            }
        }
        let blacklist = consumer.blacklist.clone();
        // Compressed once, in front of the cluster: a retry replays the compressed bytes.
        let compression = ConsumerCompressionLayer::new(
            config.compression,
            self.config.protocol.compression_limits(),
        );
        let channel = ClusterChannel::with_load_balance(directory, config, blacklist, load_balance)
            .with_attempt_spans(self.config.tracing.enabled)
            .with_span_conventions(self.config.tracing.semantic_conventions());
        let channel = self.metrics.observe_reference(channel);
        self.references.push((channel.clone(), check));
        // Above compression, so that a resumed stream's messages are read decompressed;
        // below the graceful filter, so that the whole stream counts as one call in flight.
        let resume = StreamResumeLayer::new(self.resumable.clone());
        let graceful = ConsumerGracefulLayer::new(self.lifecycle.consumer_handles())
            .layer(resume.layer(compression.layer(channel)));
        let access_log = self
            .access_log_layer(Side::Client)
            .unwrap_or_else(AccessLogLayer::disabled);
        observe::reference_channel(graceful, &self.metrics, &self.config.tracing, access_log)
    }

    /// Declares the server-streaming method `method` of `interface` (`feed.Feed`,
    /// `Subscribe`) resumable with `rule`: a stream of it that its provider moves (ends
    /// with [`crate::stream::moved`] as it goes offline) is re-opened on another instance
    /// with the request `rule` derives, and the caller's stream goes on. Replaces the
    /// default rule of `methods.<M>.resumable: true` (the original request again). Applies
    /// to every reference of `interface`, made before or after this call. Build `rule`
    /// with [`crate::stream::typed`] over the generated message types.
    pub fn resume_rule(
        &mut self,
        interface: &str,
        method: &str,
        rule: impl ResumeRule,
    ) -> &mut Self {
        self.resumable
            .insert(format!("/{interface}/{method}"), Arc::new(rule));
        self
    }

    /// The access-log filter of `side`, if the access log is on (and could be opened).
    pub(super) fn access_log_layer(&self, side: Side) -> Option<AccessLogLayer> {
        let sink = self.access_log.as_ref().ok()?.as_ref()?;
        Some(AccessLogLayer::new(
            sink.clone(),
            &self.config.application.name,
            side,
        ))
    }

    /// Adds a readiness gate: registration waits until it passes; an error fails start-up.
    pub fn readiness_gate<F, Fut>(&mut self, gate: F) -> &mut Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.gates.push(Box::new(move || gate().boxed()));
        self
    }

    /// Registers a shutdown callback (see [`Lifecycle::on_shutdown`]).
    pub fn on_shutdown<F, Fut>(&mut self, callback: F) -> &mut Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.lifecycle.on_shutdown(callback);
        self
    }

    /// Settings of the channels to provider instances, instead of the defaults and the
    /// TLS `consumer.tls` configures.
    pub fn channel_options(&mut self, options: ChannelOptions) -> &mut Self {
        self.channel_options = options;
        self
    }

    /// HTTP/2 settings of the provider listener, instead of those `protocol` configures
    /// (its keep-alive and limits).
    pub fn server_options(&mut self, options: ServerOptions) -> &mut Self {
        self.server_options = options;
        self
    }

    /// Dials providers and listens through `network` instead of the operating system's
    /// TCP, keeping every other setting (the fleet simulator runs applications this
    /// way on simulated hosts; see [`rpc_transport::NetworkStack`]). Call it after
    /// [`channel_options`](Self::channel_options) and
    /// [`server_options`](Self::server_options), which replace it. A provider on a
    /// custom network is hot-upgraded only to a generation in the same process
    /// ([`upgrade_spawner`](Self::upgrade_spawner), [`take_over`](Self::take_over)):
    /// its listener has no descriptor to hand to another process.
    pub fn network(&mut self, network: rpc_transport::Network) -> &mut Self {
        self.channel_options.network = Some(network.clone());
        self.server_options.network = Some(network);
        self
    }
}

/// The access log `config` asks for: `None` when it is off, the error naming
/// `access_log.path` when the file cannot be opened.
fn open_access_log(config: &Config) -> Result<Option<AccessLogSink>, crate::config::ConfigError> {
    let access_log = &config.access_log;
    if !access_log.enabled {
        return Ok(None);
    }
    AccessLogSink::open(&access_log.path)
        .map(Some)
        .map_err(|error| crate::config::ConfigError::Invalid {
            origin: config.origin().to_owned(),
            key: "access_log.path".to_owned(),
            message: format!(
                "{} cannot be opened for appending: {error}",
                access_log.path.display()
            ),
        })
}
