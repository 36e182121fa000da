//! What start-up is given to bring up ([`StartPlan`]: references, listeners and their
//! services, readiness gates, registries), and why it can fail ([`StartError`]).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use hyper::body::Incoming;
use rpc_core::{BoxError, InstanceId, ManagedReference, Registry, RegistryError, ServiceKey};
use rpc_transport::{ServerOptions, TransportError};
use tower::util::BoxCloneSyncService;

/// An async check the application registers; registration waits until every gate
/// passes (e.g. a cache warm-up). An error fails start-up.
pub type ReadinessGate = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), BoxError>> + Send>;

/// A service exported by an [`Export`], with its registration options.
#[derive(Clone, Debug)]
pub struct ExportedService {
    /// The identity to register.
    pub key: ServiceKey,
    /// Load-balancing weight consumers see. Default 100.
    pub weight: u32,
    /// Metadata registered with the instance.
    pub metadata: BTreeMap<String, String>,
    /// Register this long after the service is ready (Dubbo's delay export). Default 0.
    pub delay: Duration,
    /// The instance id to register under. Default `None`: a fresh one. A hot upgrade's
    /// new generation passes its predecessor's, so that it registers the *same*
    /// instance; its listener then accepts only once it is ready, as on an inherited
    /// socket (the predecessor still accepts on the address until then).
    pub instance_id: Option<InstanceId>,
    /// Start it manually offline: not registered, health NOT_SERVING, the closing mark
    /// on its responses, until `Lifecycle::online` registers it. Default false. A hot
    /// upgrade's new process passes its predecessor's offline services.
    pub offline: bool,
}

impl ExportedService {
    /// A service with weight 100, no metadata and no delay.
    pub fn new(key: ServiceKey) -> Self {
        Self {
            key,
            weight: rpc_core::DEFAULT_WEIGHT,
            metadata: BTreeMap::new(),
            delay: Duration::ZERO,
            instance_id: None,
            offline: false,
        }
    }
}

/// The HTTP service an export serves: tonic routes wrapped in the provider filters.
pub type BoxHttpService =
    BoxCloneSyncService<Request<Incoming>, Response<tonic::body::Body>, Infallible>;

/// One listener and the services it serves.
pub struct Export {
    /// Address to bind; port 0 picks a free port.
    pub bind: SocketAddr,
    /// An already-bound listening socket to serve instead of binding `bind`: one this
    /// process inherited (systemd socket activation, a hot upgrade; see
    /// `transport::InheritedListeners`). Default `None`.
    pub listener: Option<std::net::TcpListener>,
    /// Host consumers should dial. Default: the bound IP, or `127.0.0.1` when bound to
    /// an unspecified address (`0.0.0.0`).
    pub advertise_host: Option<String>,
    /// HTTP/2 settings.
    pub options: ServerOptions,
    /// What to serve.
    pub service: BoxHttpService,
    /// Services to register once the listener serves.
    pub services: Vec<ExportedService>,
}

/// Everything [`Lifecycle::start`](crate::Lifecycle::start) brings up, in the order it does.
#[derive(Default)]
pub struct StartPlan {
    /// References to subscribe, with whether start-up must wait for a provider
    /// (`consumer.check`).
    pub references: Vec<(Arc<dyn ManagedReference>, bool)>,
    /// Bound on waiting for a provider of a checked reference.
    pub check_timeout: Duration,
    /// Listeners to bind and serve.
    pub exports: Vec<Export>,
    /// Readiness gates, run after listeners serve and before registration.
    pub gates: Vec<ReadinessGate>,
    /// Registries to announce provider instances in (and to close at shutdown).
    pub registries: Vec<Arc<dyn Registry>>,
}

/// Why start-up failed. Everything done before the failure has been undone.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// [`Lifecycle::start`](crate::Lifecycle::start) was called twice.
    #[error("application {0} was already started")]
    AlreadyStarted(String),
    /// Subscribing a reference failed.
    #[error("reference {service}: {source}")]
    Subscribe {
        /// The referenced service.
        service: ServiceKey,
        /// The registry's error.
        source: RegistryError,
    },
    /// `check: true` and no provider appeared in time.
    #[error(
        "reference {service}: no provider appeared within {timeout:?} (consumer.check is true)"
    )]
    NoProvider {
        /// The referenced service.
        service: ServiceKey,
        /// The bound that passed.
        timeout: Duration,
    },
    /// A listener could not be bound, or a transport option is out of its range.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A readiness gate failed.
    #[error("readiness gate {index} failed: {source}")]
    Gate {
        /// Position of the gate, in registration order.
        index: usize,
        /// Its error.
        source: BoxError,
    },
    /// Registering an instance failed.
    #[error("registering {instance} failed: {source}")]
    Register {
        /// The instance id.
        instance: InstanceId,
        /// The registry's error.
        source: RegistryError,
    },
    /// Shutdown was asked for (a signal, or `before_shutdown`) before start-up finished;
    /// what had started was undone. A clean stop, not a failure of the application.
    #[error("start-up interrupted: shutdown was requested before the application was serving")]
    Interrupted,
    /// A signal handler could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
}
