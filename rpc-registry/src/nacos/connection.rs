//! The keeper of a Nacos client's liveness: the SDK's connection (its `NamingService`,
//! its disk cache), the registrations written through it, and the probe that notices when
//! the connection comes back.
//!
//! The server drops a connection's instances when the connection closes or stops
//! answering its health checks, and the SDK registers everything again after a
//! reconnection; but it notices a broken connection only when a request needs it, and
//! re-registers on a 3 s tick. So while this client has registrations or subscriptions, a
//! probe (one small request every [`PROBE_INTERVAL`]) keeps the SDK trying; when a probe
//! succeeds after a failure (or after waiting longer than the interval: it waited for a
//! reconnection), every registration is written again and every subscription is told to
//! read again at once (see "Presence" in the module documentation).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder, ServiceInstance};
use nacos_sdk::api::props::ClientProps;
use rpc_core::{InstanceId, RegistryError};
use tokio::sync::{Mutex, watch};

use crate::nacos::config::NacosConfig;
use crate::nacos::error::is_refusal;
use crate::nacos::login::HttpLogin;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::probe::refine_unreachable;
use crate::remote::retry::bounded;

/// How often a client with registrations or subscriptions checks its connection.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The SDK's connection of one Nacos client and the registrations written through it.
pub(super) struct ConnectionKeeper {
    /// Its client's URL (for logs and errors), subscriptions, closed token and tasks.
    lifetime: Arc<ClientLifetime>,
    /// Group of every service of this client.
    group: String,
    /// Bound on each request.
    request_timeout: Duration,
    /// The SDK's connection; `None` once closed.
    naming: parking_lot::Mutex<Option<NamingService>>,
    /// `service name#instance id` -> (service name, what was registered).
    registered: Mutex<BTreeMap<String, (String, ServiceInstance)>>,
    /// Bumped when the connection came back: every subscription reads again.
    resync: watch::Sender<u64>,
    /// Set when closing starts: the withdrawal runs once, and no call starts after it.
    closing: AtomicBool,
    /// The SDK's disk cache; removed with the client.
    _cache_dir: tempfile::TempDir,
}

/// The key of a registration in `ConnectionKeeper::registered`.
fn registration_key(name: &str, id: &InstanceId) -> String {
    format!("{name}#{id}")
}

impl ConnectionKeeper {
    /// Connects the SDK to the servers of `config` (logging in when it has credentials),
    /// checks with a read that they accept this client, and starts the probe on
    /// `lifetime`'s tracker.
    ///
    /// # Errors
    /// [`RegistryError::Unreachable`] when no server answers within `connect_timeout`;
    /// [`RegistryError::Operation`] when the server refuses the read (e.g. bad
    /// credentials) or the SDK's cache directory cannot be created.
    pub(super) async fn connect(
        lifetime: Arc<ClientLifetime>,
        config: &NacosConfig,
    ) -> Result<Arc<Self>, RegistryError> {
        let network = &config.network;
        let cache_dir = tempfile::Builder::new()
            .prefix("rpc-nacos-cache-")
            .tempdir()
            .map_err(|error| {
                lifetime.failed(
                    "connect",
                    format!("cannot create the SDK cache directory: {error}"),
                )
            })?;
        let mut props = ClientProps::new()
            .server_addr(network.endpoints.join(","))
            .namespace(config.namespace.clone())
            .app_name("rpc")
            .naming_push_empty_protection(false)
            .naming_load_cache_at_start(false)
            .cache_dir(cache_dir.path())
            // The URL is the whole configuration: no NACOS_* environment overrides.
            .env_first(false);
        if let Some(port) = config.grpc_port {
            props = props.remote_grpc_port(port);
        }
        let mut builder = NamingServiceBuilder::new(props);
        if let Some((user, password)) = &network.credentials {
            builder = builder.with_auth_plugin(Arc::new(HttpLogin::new(
                user.clone(),
                password.clone(),
                network.connect_timeout,
            )));
        }
        let deadline = tokio::time::Instant::now() + network.connect_timeout;
        let (url, timeout) = (&lifetime.url, network.connect_timeout);
        // `build` checks the connection with a health request and logs in; whatever fails
        // there, no server accepted a connection.
        let naming = match bounded(timeout, builder.build()).await {
            Ok(naming) => naming,
            Err(failure) => {
                // nacos-sdk retries a refused connection until the bound: ask the sockets.
                let error = failure.into_connect_error(url, timeout, |_| false);
                return Err(refine_unreachable(error, &network.endpoints).await);
            }
        };
        // A read proves the credentials (and the namespace) are accepted.
        let left = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_millis(100));
        bounded(
            left,
            naming.get_service_list(1, 1, Some(config.group.clone())),
        )
        .await
        .map_err(|failure| failure.into_connect_error(url, timeout, is_refusal))?;
        tracing::debug!(url = %lifetime.url, "connected to Nacos");
        let keeper = Arc::new(Self {
            lifetime,
            group: config.group.clone(),
            request_timeout: network.request_timeout,
            naming: parking_lot::Mutex::new(Some(naming.clone())),
            registered: Mutex::new(BTreeMap::new()),
            resync: watch::channel(0).0,
            closing: AtomicBool::new(false),
            _cache_dir: cache_dir,
        });
        keeper
            .lifetime
            .tasks
            .spawn(probe_connection(Arc::downgrade(&keeper), naming));
        Ok(keeper)
    }

    /// Bound on each request.
    pub(super) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The SDK's connection, for a call that may start.
    ///
    /// # Errors
    /// [`RegistryError::Closed`] once closing has started.
    pub(super) fn naming(&self) -> Result<NamingService, RegistryError> {
        match &*self.naming.lock() {
            Some(naming) if !self.is_closing() => Ok(naming.clone()),
            _ => Err(self.lifetime.closed_error()),
        }
    }

    /// Told each time the connection came back (the value counts the times): a
    /// subscription reads again.
    pub(super) fn resyncs(&self) -> watch::Receiver<u64> {
        self.resync.subscribe()
    }

    /// Registers `nacos` (instance `id`) in the service `name` and records it, so that
    /// `unregister` and closing withdraw it and a reconnection writes it again.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] when the server fails the request or does not answer
    /// in time; the registration is recorded all the same, since the SDK keeps retrying it.
    pub(super) async fn register(
        &self,
        naming: &NamingService,
        id: &InstanceId,
        name: String,
        nacos: ServiceInstance,
    ) -> Result<(), RegistryError> {
        let mut registered = self.registered.lock().await;
        let register =
            naming.register_instance(name.clone(), Some(self.group.clone()), nacos.clone());
        let result = bounded(self.request_timeout, register).await;
        // Even when the answer was an error the SDK keeps retrying the registration: keep it
        // so that unregister and close withdraw it.
        registered.insert(registration_key(&name, id), (name, nacos));
        result.map_err(|failure| failure.into_operation(&self.lifetime.url, "register"))?;
        Ok(())
    }

    /// Deregisters instance `id` of the service `name` if it was registered through this
    /// client; `false` when it was not.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] when the server fails the request or does not answer
    /// in time (the SDK keeps it queued and applies it when the server returns).
    pub(super) async fn unregister(
        &self,
        naming: &NamingService,
        id: &InstanceId,
        name: &str,
    ) -> Result<bool, RegistryError> {
        let mut registered = self.registered.lock().await;
        let Some((name, nacos)) = registered.remove(&registration_key(name, id)) else {
            return Ok(false);
        };
        let deregister = naming.deregister_instance(name, Some(self.group.clone()), nacos);
        bounded(self.request_timeout, deregister)
            .await
            .map_err(|failure| failure.into_operation(&self.lifetime.url, "unregister"))?;
        Ok(true)
    }

    /// Forgets instance `id` of the service `name` without deregistering it: another
    /// connection registered the same address (a hot upgrade's new process) and holds it
    /// now; from now on this client neither writes it again nor deregisters it when it
    /// closes. `false` when it was not recorded.
    pub(super) async fn forget(&self, id: &InstanceId, name: &str) -> bool {
        self.registered
            .lock()
            .await
            .remove(&registration_key(name, id))
            .is_some()
    }

    /// Whether closing has started.
    pub(super) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Marks the client closing; `false` when it already was (the withdrawal runs once).
    pub(super) fn start_closing(&self) -> bool {
        !self.closing.swap(true, Ordering::AcqRel)
    }

    /// The SDK's connection, taken for the withdrawal: no call gets it afterwards.
    pub(super) fn take_naming(&self) -> Option<NamingService> {
        self.naming.lock().take()
    }

    /// Deregisters every registration.
    ///
    /// # Errors
    /// The first deregistration that failed, as a [`RegistryError::Operation`] of
    /// `close`; the others are still tried.
    pub(super) async fn deregister_all(&self, naming: &NamingService) -> Result<(), RegistryError> {
        let mut first_error = None;
        let registered = std::mem::take(&mut *self.registered.lock().await);
        for (name, nacos) in registered.into_values() {
            let deregister = naming.deregister_instance(name, Some(self.group.clone()), nacos);
            if let Err(failure) = bounded(self.request_timeout, deregister).await {
                first_error.get_or_insert(failure.into_operation(&self.lifetime.url, "close"));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes every registration again (after the connection came back; idempotent).
    async fn register_again(&self, naming: &NamingService) {
        let registered = self.registered.lock().await;
        for (name, nacos) in registered.values() {
            let register =
                naming.register_instance(name.clone(), Some(self.group.clone()), nacos.clone());
            if let Err(failure) = bounded(self.request_timeout, register).await {
                tracing::warn!(url = %self.lifetime.url, service = %name, error = %failure.into_source(), "registering again failed; the SDK retries");
            }
        }
    }
}

/// The probe task (see the file's documentation). Holds the keeper weakly so that dropping
/// the client ends it.
async fn probe_connection(keeper: Weak<ConnectionKeeper>, naming: NamingService) {
    let Some(cancel) = keeper
        .upgrade()
        .map(|keeper| keeper.lifetime.closed.clone())
    else {
        return;
    };
    let mut failing = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(PROBE_INTERVAL) => {}
        }
        let Some(keeper) = keeper.upgrade() else {
            return;
        };
        let busy =
            !keeper.registered.lock().await.is_empty() || keeper.lifetime.subscriptions.len() > 0;
        if !busy {
            continue;
        }
        let probe = naming.get_service_list(1, 1, Some(keeper.group.clone()));
        let started = tokio::time::Instant::now();
        let answered = tokio::select! {
            () = cancel.cancelled() => return,
            answered = bounded(keeper.request_timeout, probe) => answered.is_ok(),
        };
        // A probe that waited for the SDK to reconnect answers late, not with an error.
        let reconnected = failing || started.elapsed() > PROBE_INTERVAL;
        if answered && reconnected {
            tracing::info!(url = %keeper.lifetime.url, "Nacos answers again; registering and reading again");
            keeper.register_again(&naming).await;
            keeper
                .resync
                .send_modify(|count| *count = count.wrapping_add(1));
        } else if !answered && !failing {
            tracing::warn!(url = %keeper.lifetime.url, "Nacos does not answer; keeping the last known instances");
        }
        failing = !answered;
    }
}
