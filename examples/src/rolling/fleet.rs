//! The instances of a run: how to start a provider, a proxy or the load client, and how
//! to stop one gracefully or the hard way.

use std::sync::Arc;
use std::time::Duration;

use lossless_rpc::registry::{MemoryHub, RegistryUrl};
use lossless_rpc::{Application, ApplicationBuilder, Config, ReferenceChannel, ShutdownReport};
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use proto::feed::feed_server::FeedServer;
use rpc_testkit::feed::{self, FeedProvider};
use rpc_testkit::services::EchoProvider;
use tonic::{Request, Response, Status};

use super::options::{Mode, Options, RollingError, Streams};
use super::process::ChildInstance;
use super::readiness::ReadinessWatch;
use super::role::Role;

/// Group under which proxies register `echo.Echo`.
pub const PROXY_GROUP: &str = "proxy";
/// Group under which providers register `echo.Echo`.
pub const BACKEND_GROUP: &str = "backend";

/// Where instances find each other.
#[derive(Clone, Debug)]
enum Registry {
    /// One in-process hub for the run; every instance gets its own client with the
    /// propagation delay.
    Memory { hub: MemoryHub, delay: Duration },
    /// A registry server; every instance connects its own client.
    Url(String),
}

/// Starts instances of a run. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Fleet {
    registry: Registry,
    mode: Mode,
    work_ms: u32,
    /// Whether proxies and providers run the adaptive concurrency limit.
    limit: bool,
    /// Whether instances install signal handlers (only in their own process).
    signals: bool,
    /// The binary that child processes run.
    executable: std::path::PathBuf,
    /// With `--admin`: every instance started is watched through its admin endpoint.
    readiness: Option<ReadinessWatch>,
}

impl Fleet {
    /// The fleet of a run with `options`.
    ///
    /// # Errors
    /// [`RollingError::Usage`] for an unparsable registry URL.
    pub async fn new(options: &Options) -> Result<Self, RollingError> {
        let url = RegistryUrl::parse(&options.registry)
            .map_err(|e| RollingError::Usage(e.to_string()))?;
        let usage =
            |e: lossless_rpc::core::RegistryError| RollingError::Usage(format!("--registry: {e}"));
        let registry = if url.scheme() == "memory" {
            url.expect_params(&["delay"]).map_err(usage)?;
            if !url.hosts().is_empty() {
                return Err(RollingError::Usage(format!(
                    "--registry {}: a run uses its own in-process hub; give memory:// without a hub name",
                    url.redacted()
                )));
            }
            let delay = url
                .duration_param("delay", options.registry_delay)
                .map_err(usage)?;
            Registry::Memory {
                hub: MemoryHub::new(),
                delay,
            }
        } else if url.scheme() == "static" {
            return Err(RollingError::Usage(
                "--registry static://… lists fixed addresses, but every restart starts an instance \
                 on a new port; use memory://, etcd://, zookeeper:// or nacos://"
                    .into(),
            ));
        } else {
            // Fail early, with the registry's own error, if it cannot be reached.
            let probe = lossless_rpc::registry::connect(&options.registry)
                .await
                .map_err(|e| RollingError::Usage(e.to_string()))?;
            let _ = probe.close().await;
            Registry::Url(options.registry.clone())
        };
        Ok(Self {
            registry,
            mode: options.mode,
            work_ms: options.work_ms,
            limit: options.limit,
            signals: false,
            executable: options.executable.clone(),
            readiness: options.admin.then(ReadinessWatch::start),
        })
    }

    /// The fleet of one child process: it starts its single instance in-process, with
    /// signal handlers, on the registry at `url`.
    pub fn for_child(url: &str, work_ms: u32, limit: bool) -> Self {
        Self {
            registry: Registry::Url(url.to_owned()),
            mode: Mode::InProcess,
            work_ms,
            limit,
            signals: true,
            executable: std::path::PathBuf::new(),
            readiness: None,
        }
    }

    /// The readiness watch of `--admin`, if on.
    pub fn readiness(&self) -> Option<&ReadinessWatch> {
        self.readiness.as_ref()
    }

    /// How long until consumers hear of a registration (the in-process registry's
    /// delay; a small allowance for real registries).
    pub fn propagation(&self) -> Duration {
        match &self.registry {
            Registry::Memory { delay, .. } => *delay,
            Registry::Url(_) => Duration::from_millis(500),
        }
    }

    /// Starts one instance.
    ///
    /// # Errors
    /// [`RollingError::Start`] naming the instance.
    pub async fn start(&self, role: Role, name: &str) -> Result<Instance, RollingError> {
        let started = match self.mode {
            Mode::InProcess => self
                .start_in_process(role, name)
                .await
                .map(Instance::InProcess),
            Mode::Processes => match &self.registry {
                Registry::Url(url) => ChildInstance::spawn(
                    &self.executable,
                    role,
                    name,
                    url,
                    self.work_ms,
                    self.limit,
                )
                .await
                .map(|child| Instance::Process(Box::new(child))),
                Registry::Memory { .. } => {
                    Err("processes need a cross-process registry".to_owned())
                }
            },
        };
        let instance = started.map_err(|message| RollingError::Start {
            name: name.to_owned(),
            message,
        })?;
        if let (Some(watch), Some(admin)) = (&self.readiness, instance.admin_addr()) {
            watch.watch(name, admin);
        }
        Ok(instance)
    }

    /// Starts one instance as an application in this process.
    pub(crate) async fn start_in_process(
        &self,
        role: Role,
        name: &str,
    ) -> Result<Application, String> {
        let mut config = role_config(role, name, self.signals);
        config.provider.limit.enabled = self.limit;
        let mut builder = self.builder(config);
        match role {
            Role::Provider => {
                builder.service(EchoServer::new(EchoProvider {
                    work_ms: self.work_ms,
                }));
                // The long streams of `--streams resumable`, moved as the provider stops.
                builder.service(FeedServer::new(FeedProvider::moving(name)));
            }
            Role::Proxy => {
                let backend = EchoClient::new(builder.reference("echo.Echo"));
                builder.service(EchoServer::new(Proxy { backend }));
            }
        }
        builder.start().await.map_err(|e| e.to_string())
    }

    /// Starts the load client: a consumer of the proxies.
    ///
    /// # Errors
    /// [`RollingError::Start`] if it cannot start.
    pub async fn client(
        &self,
        streams: Streams,
    ) -> Result<
        (
            Application,
            EchoClient<ReferenceChannel>,
            Option<ReferenceChannel>,
        ),
        RollingError,
    > {
        let mut config = base_config("load-client", false);
        config
            .consumer
            .references
            .entry("echo.Echo".to_owned())
            .or_default()
            .group = PROXY_GROUP.to_owned();
        let resumable = streams == Streams::Resumable;
        if resumable {
            config.consumer.references.insert(
                feed::SERVICE.to_owned(),
                feed::resumable_reference(BACKEND_GROUP),
            );
        }
        let mut builder = self.builder(config);
        let client = EchoClient::new(builder.reference("echo.Echo"));
        let feed = resumable.then(|| builder.reference(feed::SERVICE));
        let app = builder.start().await.map_err(|e| RollingError::Start {
            name: "load-client".to_owned(),
            message: e.to_string(),
        })?;
        Ok((app, client, feed))
    }

    fn builder(&self, mut config: Config) -> ApplicationBuilder {
        match &self.registry {
            Registry::Memory { hub, delay } => {
                let mut builder = Application::builder(config);
                builder.registry("default", Arc::new(hub.client_with_delay(*delay)));
                builder
            }
            Registry::Url(url) => {
                config
                    .registries
                    .get_mut("default")
                    .expect("default registry")
                    .url = url.clone();
                Application::builder(config)
            }
        }
    }
}

fn base_config(name: &str, signals: bool) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.graceful_shutdown.internal_signal = signals;
    // Many instances on one host: each admin endpoint on a free port.
    config.admin.port = 0;
    // The tool sets up its own logging (warn by default: its output is the table);
    // dozens of instances logging their start and stop at info would bury it.
    config.application.logging = false;
    config
}

/// The configuration of a provider or proxy called `name`; `signals` installs the
/// SIGTERM/SIGINT handlers (child processes).
pub fn role_config(role: Role, name: &str, signals: bool) -> Config {
    let mut config = base_config(name, signals);
    let group = match role {
        Role::Provider => BACKEND_GROUP,
        Role::Proxy => PROXY_GROUP,
    };
    config
        .provider
        .services
        .entry("echo.Echo".to_owned())
        .or_default()
        .group = group.to_owned();
    if role == Role::Provider {
        config
            .provider
            .services
            .entry(feed::SERVICE.to_owned())
            .or_default()
            .group = group.to_owned();
    }
    if role == Role::Proxy {
        config
            .consumer
            .references
            .entry("echo.Echo".to_owned())
            .or_default()
            .group = BACKEND_GROUP.to_owned();
    }
    config
}

/// A proxy: serves `echo.Echo` by calling a provider through its own reference.
#[derive(Clone, Debug)]
pub struct Proxy {
    /// The reference to the providers.
    pub backend: EchoClient<ReferenceChannel>,
}

#[tonic::async_trait]
impl Echo for Proxy {
    async fn echo(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let reply = self.backend.clone().echo(request.into_inner()).await?;
        Ok(Response::new(reply.into_inner()))
    }
}

/// One running provider or proxy.
pub enum Instance {
    /// An application in this process.
    InProcess(Application),
    /// A child process.
    Process(Box<ChildInstance>),
}

impl Instance {
    /// The address it serves on.
    pub fn addr(&self) -> String {
        match self {
            Instance::InProcess(app) => app.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Instance::Process(child) => child.addr().to_owned(),
        }
    }

    /// Its admin endpoint, if it has one.
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Instance::InProcess(app) => app.admin_addr(),
            Instance::Process(child) => child.admin_addr(),
        }
    }

    /// Stops it: the graceful shutdown sequence, or a kill. Returns the shutdown report
    /// (as the child printed it, for processes), `None` for a kill.
    pub async fn stop(self, graceful: bool) -> Option<ShutdownReport> {
        match (self, graceful) {
            (Instance::InProcess(app), true) => Some(app.before_shutdown().await),
            (Instance::InProcess(app), false) => {
                app.abort().await;
                None
            }
            (Instance::Process(child), graceful) => (*child).stop(graceful).await,
        }
    }
}
