//! Graceful online: references, then services, then readiness gates, then registration.
//! Each step finishes before the next begins; if one fails, what was done is undone.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::{BoxFuture, join_all};
use http::{Request, Response};
use hyper::body::Incoming;
use tonic_health::ServingStatus;
use tower::util::BoxCloneSyncService;
use tracing::{Instrument, info_span};

use super::{Lifecycle, Phase};
use crate::registry::{BoxError, Registry, RegistryError};
use crate::transport::{Server, ServerOptions, TransportError};
use crate::{Instance, InstanceId, ServiceKey};

/// The consumer side of one reference, as the lifecycle drives it.
#[async_trait]
pub trait ManagedReference: Send + Sync + 'static {
    /// The service referenced.
    fn service(&self) -> &ServiceKey;
    /// Subscribes to the registry (start-up step 1).
    async fn subscribe(&self) -> Result<(), RegistryError>;
    /// Resolves once at least one provider is known.
    async fn wait_for_provider(&self);
    /// Closes channels and unsubscribes (shutdown step 6).
    async fn close(&self);
}

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
    /// new process passes its predecessor's, so that it registers the *same* instance.
    pub instance_id: Option<InstanceId>,
}

impl ExportedService {
    /// A service with weight 100, no metadata and no delay.
    pub fn new(key: ServiceKey) -> Self {
        Self {
            key,
            weight: crate::DEFAULT_WEIGHT,
            metadata: BTreeMap::new(),
            delay: Duration::ZERO,
            instance_id: None,
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

/// Everything [`Lifecycle::start`] brings up, in the order it does.
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
    /// [`Lifecycle::start`] was called twice.
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
    /// A listener could not be bound.
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

impl Lifecycle {
    /// Brings the application online in order: subscribe references (and, for checked
    /// ones, wait for a provider) → bind listeners and serve → run readiness gates →
    /// register every exported service in every registry (honouring `delay`) → phase
    /// [`Phase::Serving`]. Installs signal handlers first when `internal_signal` is on.
    ///
    /// # Errors
    /// The first step's [`StartError`]; by then registrations are withdrawn, listeners
    /// closed and references closed, and the phase is [`Phase::Stopped`].
    pub async fn start(&self, plan: StartPlan) -> Result<(), StartError> {
        if !self.inner.phase.advance(Phase::Starting) {
            return Err(StartError::AlreadyStarted(self.name().to_owned()));
        }
        let StartPlan {
            references,
            check_timeout,
            exports,
            gates,
            registries,
        } = plan;
        self.inner.parts.lock().registries = registries.clone();
        // One span per step, as the shutdown's steps have.
        let steps = async {
            if self.config().internal_signal {
                self.install_signal_handlers()
                    .map_err(StartError::Signals)?;
            }
            self.start_references(references, check_timeout)
                .instrument(info_span!("references"))
                .await?;
            let pending = self
                .start_services(exports)
                .instrument(info_span!("services"))
                .await?;
            run_gates(gates)
                .instrument(info_span!("readiness-gates"))
                .await?;
            self.register_all(pending, &registries)
                .instrument(info_span!("register"))
                .await
        }
        .instrument(info_span!("startup", app = %self.name()));
        // A signal (or before_shutdown) during start-up stops the waiting at once: a
        // provider check, a readiness gate or a registration delay can be long.
        let result = tokio::select! {
            result = steps => result,
            _ = self.inner.start_cancel.cancelled() => Err(StartError::Interrupted),
        };
        match result {
            Ok(()) => {
                self.set_health(ServingStatus::Serving).await;
                self.advance(Phase::Serving);
                Ok(())
            }
            Err(error) => {
                tracing::error!(app = %self.name(), %error, "start-up failed; undoing it");
                self.abort().await;
                Err(error)
            }
        }
    }

    async fn start_references(
        &self,
        references: Vec<(Arc<dyn ManagedReference>, bool)>,
        check_timeout: Duration,
    ) -> Result<(), StartError> {
        for (reference, _) in &references {
            self.inner.parts.lock().references.push(reference.clone());
            reference
                .subscribe()
                .await
                .map_err(|source| StartError::Subscribe {
                    service: reference.service().clone(),
                    source,
                })?;
        }
        for (reference, check) in &references {
            if *check
                && tokio::time::timeout(check_timeout, reference.wait_for_provider())
                    .await
                    .is_err()
            {
                return Err(StartError::NoProvider {
                    service: reference.service().clone(),
                    timeout: check_timeout,
                });
            }
        }
        Ok(())
    }

    /// Binds and serves every export; returns the instances to register.
    async fn start_services(
        &self,
        exports: Vec<Export>,
    ) -> Result<Vec<(Instance, Duration)>, StartError> {
        let mut pending = Vec::new();
        for export in exports {
            let server = match export.listener {
                Some(listener) => Server::from_std(listener, export.options)?,
                None => Server::bind(export.bind, export.options).await?,
            };
            let addr = server.local_addr();
            let host = export
                .advertise_host
                .unwrap_or_else(|| advertised_host(addr.ip()));
            let handle = server.serve(export.service);
            tracing::info!(app = %self.name(), %addr, "serving");
            self.inner.served.lock().push(handle.clone());
            let mut parts = self.inner.parts.lock();
            parts.servers.push(handle);
            for service in export.services {
                parts.health_names.push(service.key.interface.to_string());
                parts.provided.push(service.key.clone());
                let mut instance = Instance::new(service.key, host.clone(), addr.port())
                    .with_weight(service.weight);
                if let Some(id) = service.instance_id {
                    instance.id = id;
                }
                instance.metadata = service.metadata;
                pending.push((instance, service.delay));
            }
        }
        Ok(pending)
    }

    async fn register_all(
        &self,
        pending: Vec<(Instance, Duration)>,
        registries: &[Arc<dyn Registry>],
    ) -> Result<(), StartError> {
        let registrations = pending.iter().flat_map(|(instance, delay)| {
            registries.iter().map(move |registry| async move {
                tokio::time::sleep(*delay).await;
                registry
                    .register(instance)
                    .await
                    .map(|()| (registry.clone(), instance.clone()))
                    .map_err(|source| StartError::Register {
                        instance: instance.id.clone(),
                        source,
                    })
            })
        });
        let mut first_error = None;
        for result in join_all(registrations).await {
            match result {
                Ok(registration) => self.inner.parts.lock().registrations.push(registration),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    pub(crate) async fn set_health(&self, status: ServingStatus) {
        let names = self.inner.parts.lock().health_names.clone();
        self.inner.health.set_service_status("", status).await;
        for name in names {
            self.inner.health.set_service_status(name, status).await;
        }
    }
}

async fn run_gates(gates: Vec<ReadinessGate>) -> Result<(), StartError> {
    for (index, gate) in gates.into_iter().enumerate() {
        gate()
            .await
            .map_err(|source| StartError::Gate { index, source })?;
    }
    Ok(())
}

fn advertised_host(ip: IpAddr) -> String {
    if ip.is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        ip.to_string()
    }
}
