//! `Application`: wires a configuration into registries, references, services and one
//! lifecycle.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use futures_util::FutureExt;
use rpc_cluster::{ClusterChannel, ClusterReference, Directory};
use rpc_core::lifecycle::{
    Export, ExportedService, ManagedReference, ReadinessGate, StartError, StartPlan,
};
use rpc_core::transport::{ChannelOptions, ServerOptions};
use rpc_core::{BoxError, Lifecycle, Phase, Registry, RegistryError, ServiceKey, ShutdownReport};
use rpc_filter::graceful::{ConsumerGraceful, ConsumerGracefulLayer, ProviderGracefulLayer};
use tokio::sync::watch;
use tonic::body::Body as TonicBody;
use tonic::server::NamedService;
use tonic::service::RoutesBuilder;
use tower::util::BoxCloneSyncService;
use tower_layer::Layer;

use crate::config::{Config, ConfigError};

/// The channel a reference gives application code: the consumer filters over the
/// cluster. Generated clients take it unchanged: `GreeterClient::new(channel)`.
pub type ReferenceChannel = ConsumerGraceful<ClusterChannel>;

/// Why an application could not be built or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplicationError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A registry could not be built or reached.
    #[error("registry `{name}`: {source}")]
    Registry {
        /// Its name under `registries`.
        name: String,
        /// The registry's error.
        source: RegistryError,
    },
    /// A reference names a registry that is not configured.
    #[error("consumer.registry names `{0}`, which is not under `registries`")]
    UnknownRegistry(String),
    /// `protocol.host` is not an IP address.
    #[error("protocol.host `{0}` is not an IP address")]
    InvalidHost(String),
    /// Start-up failed (and was undone).
    #[error(transparent)]
    Start(#[from] StartError),
}

/// Collects services, references and hooks, then starts them in order.
///
/// ```no_run
/// # use rpc::{Application, Config};
/// # async fn demo() -> Result<i32, rpc::ApplicationError> {
/// let mut builder = Application::builder(Config::default());
/// // let client = GreeterClient::new(builder.reference("helloworld.Greeter"));
/// // builder.service(GreeterServer::new(MyGreeter));
/// let app = builder.start().await?;
/// let report = app.wait().await; // until SIGTERM/SIGINT ran the shutdown sequence
/// Ok(report.exit_code()) // main exits with this code
/// # }
/// ```
pub struct ApplicationBuilder {
    config: Config,
    lifecycle: Lifecycle,
    registries: BTreeMap<String, Arc<dyn Registry>>,
    routes: RoutesBuilder,
    services: Vec<ServiceKey>,
    references: Vec<(ClusterChannel, bool)>,
    gates: Vec<ReadinessGate>,
    channel_options: ChannelOptions,
    server_options: ServerOptions,
}

/// A started application. Dropping it does not stop it: call
/// [`Application::before_shutdown`] or send SIGTERM.
pub struct Application {
    lifecycle: Lifecycle,
    local_addr: Option<SocketAddr>,
    references: Vec<ClusterChannel>,
}

impl Application {
    /// A builder for an application configured by `config`.
    pub fn builder(config: Config) -> ApplicationBuilder {
        ApplicationBuilder::new(config)
    }

    /// The application's lifecycle (phase, counters, shutdown).
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// The address providers listen on, if the application provides any service.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.lifecycle.phase()
    }

    /// A receiver that sees every phase change.
    pub fn watch_phase(&self) -> watch::Receiver<Phase> {
        self.lifecycle.watch_phase()
    }

    /// The cluster channels of this application's references, for their statistics.
    pub fn references(&self) -> &[ClusterChannel] {
        &self.references
    }

    /// The BeforeShutdown hook: runs the graceful shutdown sequence once (later calls
    /// await the same run) and returns its report.
    pub fn before_shutdown(&self) -> impl Future<Output = ShutdownReport> + Send + 'static {
        self.lifecycle.before_shutdown()
    }

    /// Waits until the shutdown sequence (started by a signal or by
    /// [`Application::before_shutdown`]) has finished.
    pub async fn wait(&self) -> ShutdownReport {
        self.lifecycle.wait().await
    }

    /// Registers a callback for the last shutdown step (see [`Lifecycle::on_shutdown`]).
    pub fn on_shutdown<F, Fut>(&self, callback: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.lifecycle.on_shutdown(callback);
    }

    /// Stops at once, like a killed process (see [`Lifecycle::abort`]): what graceful
    /// offline exists to prevent. For demonstrations and tests.
    pub async fn abort(&self) {
        self.lifecycle.abort().await;
    }
}

impl ApplicationBuilder {
    fn new(config: Config) -> Self {
        let lifecycle = Lifecycle::new(
            config.application.name.clone(),
            config.graceful_shutdown.clone(),
        );
        Self {
            config,
            lifecycle,
            registries: BTreeMap::new(),
            routes: RoutesBuilder::default(),
            services: Vec::new(),
            references: Vec::new(),
            gates: Vec::new(),
            channel_options: ChannelOptions::default(),
            server_options: ServerOptions::default(),
        }
    }

    /// The lifecycle the application will run under (available before start, e.g. to
    /// watch phases or to let a service's handler see the phase).
    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
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

    /// A reference to the service `interface` (e.g. `helloworld.Greeter`), configured by
    /// `consumer.references.<interface>`. Wrap it in the generated client:
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
        let channel = ClusterChannel::new(directory, config, consumer.blacklist.clone());
        self.references.push((channel.clone(), check));
        ConsumerGracefulLayer::new(self.lifecycle.consumer_handles()).layer(channel)
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

    /// Settings of the channels to provider instances.
    pub fn channel_options(&mut self, options: ChannelOptions) -> &mut Self {
        self.channel_options = options;
        self
    }

    /// HTTP/2 settings of the provider listener.
    pub fn server_options(&mut self, options: ServerOptions) -> &mut Self {
        self.server_options = options;
        self
    }

    /// Connects the registries and starts everything in order (see
    /// [`Lifecycle::start`]).
    ///
    /// # Errors
    /// [`ApplicationError`] naming the registry, address, reference or step that failed;
    /// what had started is undone.
    pub async fn start(mut self) -> Result<Application, ApplicationError> {
        let registries = self.connect_registries().await?;
        let reference_registry = self.reference_registry(&registries)?;
        let references: Vec<(Arc<dyn ManagedReference>, bool)> = self
            .references
            .iter()
            .map(|(channel, check)| {
                let reference = ClusterReference::new(channel.clone(), reference_registry.clone());
                (Arc::new(reference) as Arc<dyn ManagedReference>, *check)
            })
            .collect();
        let exports = self.export()?;
        let plan = StartPlan {
            references,
            check_timeout: self.config.consumer.check_timeout,
            exports,
            gates: std::mem::take(&mut self.gates),
            registries: registries.values().cloned().collect(),
        };
        self.lifecycle.start(plan).await?;
        Ok(Application {
            local_addr: self
                .lifecycle
                .servers()
                .first()
                .map(|server| server.local_addr()),
            lifecycle: self.lifecycle,
            references: self
                .references
                .into_iter()
                .map(|(channel, _)| channel)
                .collect(),
        })
    }

    async fn connect_registries(
        &mut self,
    ) -> Result<BTreeMap<String, Arc<dyn Registry>>, ApplicationError> {
        let mut registries = std::mem::take(&mut self.registries);
        for (name, entry) in &self.config.registries {
            if registries.contains_key(name) {
                continue;
            }
            let registry = rpc_registry::connect(&entry.url).await.map_err(|source| {
                ApplicationError::Registry {
                    name: name.clone(),
                    source,
                }
            })?;
            registries.insert(name.clone(), registry);
        }
        Ok(registries)
    }

    fn reference_registry(
        &self,
        registries: &BTreeMap<String, Arc<dyn Registry>>,
    ) -> Result<Arc<dyn Registry>, ApplicationError> {
        match &self.config.consumer.registry {
            Some(name) => registries
                .get(name)
                .cloned()
                .ok_or_else(|| ApplicationError::UnknownRegistry(name.clone())),
            None => {
                registries.values().next().cloned().ok_or_else(|| {
                    ApplicationError::UnknownRegistry("(none configured)".to_owned())
                })
            }
        }
    }

    fn export(&mut self) -> Result<Vec<Export>, ApplicationError> {
        if self.services.is_empty() {
            return Ok(Vec::new());
        }
        let protocol = &self.config.protocol;
        let ip: IpAddr = protocol
            .host
            .parse()
            .map_err(|_| ApplicationError::InvalidHost(protocol.host.clone()))?;
        let mut routes = std::mem::take(&mut self.routes);
        routes.add_service(self.lifecycle.health_service());
        let service =
            ProviderGracefulLayer::new(self.lifecycle.provider_handles()).layer(routes.routes());
        let services = self
            .services
            .iter()
            .map(|key| {
                let settings = self
                    .config
                    .provider
                    .services
                    .get(&*key.interface)
                    .cloned()
                    .unwrap_or_default();
                let mut exported = ExportedService::new(key.clone());
                exported.weight = settings.weight;
                exported.delay = settings.delay;
                exported.metadata = settings.metadata;
                exported.metadata.insert(
                    "application".to_owned(),
                    self.config.application.name.clone(),
                );
                exported
            })
            .collect();
        Ok(vec![Export {
            bind: SocketAddr::new(ip, protocol.port),
            advertise_host: protocol.advertise_host.clone(),
            options: self.server_options.clone(),
            service: BoxCloneSyncService::new(service),
            services,
        }])
    }
}
