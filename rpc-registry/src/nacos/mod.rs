//! The Nacos backend:
//! `nacos://[user:pass@]host:port[,host:port...][?namespace=public&group=DEFAULT_GROUP&cluster=DEFAULT]`.
//!
//! # Layout
//! A service is the Nacos service named [`service_name`] (`service.path_segment()`: the
//! interface, then `:version` and `@group` when set) in the URL's `namespace` and `group`.
//! An instance is an *ephemeral* Nacos instance at its host and port, in the URL's
//! `cluster`, with its weight, its metadata, and its whole JSON under the metadata key
//! [`INSTANCE_METADATA_KEY`], so that it comes back with every field. Instances written by
//! other clients (no such key) are read from Nacos' own fields.
//!
//! Nacos identifies an instance by service, cluster, IP and port: two instances of one
//! service at the same address are one instance to Nacos.
//!
//! # Presence
//! nacos-sdk registers over its gRPC connection; the server drops a connection's instances
//! when the connection closes (a process that dies) or stops answering its health checks.
//! After a reconnection the SDK registers everything again by itself, but it notices a
//! broken connection only when a request needs it (its own health check runs every 5 s,
//! then it waits 2 s, 4 s, ... before reconnecting), and re-registers on a 3 s tick. So
//! while this client has registrations or subscriptions, a probe (one small request every
//! [`PROBE_INTERVAL`]) keeps the SDK trying; when a probe succeeds after a failure (or
//! after waiting longer than the interval: it waited for a reconnection), every
//! registration is written again and every subscription reads again at once.
//!
//! # Subscriptions
//! A subscription reads the service from the server, then reads it again each time the
//! SDK's push listener reports a change (several reports during one read cause one more
//! read). Every snapshot is therefore the server's own answer, in the order the reads were
//! made; no server revision exists, so revisions come from a counter of this client. The
//! SDK's *push-empty protection* is turned off, so the removal of a service's last
//! instance arrives, as an authoritative empty snapshot; a failed read delivers nothing
//! (the consumer keeps its last set) and is retried. rnacos batches pushes (about 500 ms),
//! so changes reach subscribers 0.5 to 1 s after they happen.
//!
//! # Parameters
//! `namespace` (default `public`), `group` (default `DEFAULT_GROUP`), `cluster` (default
//! `DEFAULT`: the cluster instances register in; subscribers see every cluster),
//! `grpc_port` (default: the HTTP port + 1000, the Nacos convention), `connect_timeout`
//! (default 3 s), `request_timeout` (default 3 s). The port defaults to 8848. `user:pass@`
//! logs in through the HTTP API (see the `login` module); credentials never appear in logs or errors.
//!
//! # The SDK's own state
//! The SDK keeps a disk cache; it is put in a temporary directory removed with the client
//! (never `$HOME/nacos`). Its connection lives until the last request it retries is done:
//! `close` (and dropping the client) withdraws every registration and subscription so that
//! nothing keeps it. A registration or unregistration that times out stays queued in the
//! SDK, which applies it when the server returns.

mod login;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, NamingServiceBuilder, ServiceInstance,
};
use nacos_sdk::api::props::ClientProps;
use rpc_core::{
    Instance, InstanceId, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId,
};
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;

use crate::remote::NetworkSettings;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure, bounded};
use crate::remote::snapshots::SnapshotPublisher;
use crate::url::RegistryUrl;

/// Port of the HTTP API when the URL gives none.
pub const DEFAULT_PORT: u16 = 8848;
/// Namespace when the URL has no `namespace`.
pub const DEFAULT_NAMESPACE: &str = "public";
/// Group when the URL has no `group`.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// Cluster when the URL has no `cluster`.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";
/// The metadata key holding an instance's JSON.
pub const INSTANCE_METADATA_KEY: &str = "rpc.instance";
/// How often a client with registrations or subscriptions checks its connection.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The query parameters of a `nacos://` URL besides [`NetworkSettings::PARAMS`].
const PARAMS: [&str; 4] = ["namespace", "group", "cluster", "grpc_port"];

/// The Nacos service name of `service`: its path segment (`interface[:version][@group]`,
/// percent-encoded, so never containing Nacos' `@@` separator).
pub fn service_name(service: &ServiceKey) -> String {
    service.path_segment()
}

/// Settings of a [`NacosRegistry`], from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NacosConfig {
    /// Each server's HTTP API, the credentials (for the HTTP login) and the time bounds;
    /// `connect_timeout` bounds connecting and each login.
    pub network: NetworkSettings,
    /// The servers' gRPC port, when not the HTTP port + 1000.
    pub grpc_port: Option<u16>,
    /// Namespace id.
    pub namespace: String,
    /// Group of every service of this client.
    pub group: String,
    /// Cluster this client's instances register in.
    pub cluster: String,
}

impl NacosConfig {
    /// Reads the settings of a `nacos://` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault: an unknown parameter, an empty
    /// `namespace`, `group` or `cluster` (or a `group` containing `@@`), a `grpc_port` that
    /// is not a port, then those of [`NetworkSettings::from_url`] (a user without password,
    /// no host, a timeout that does not parse or is zero).
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        NetworkSettings::expect_params(url, &PARAMS)?;
        let text = |name: &str, default: &str| -> Result<String, RegistryError> {
            let value = url.param(name).unwrap_or(default);
            if value.trim().is_empty() {
                return Err(url.invalid(format!("parameter `{name}` must not be empty")));
            }
            Ok(value.to_owned())
        };
        let group = text("group", DEFAULT_GROUP)?;
        if group.contains("@@") {
            return Err(url.invalid(format!(
                "parameter `group`: `{group}` must not contain `@@`"
            )));
        }
        let grpc_port = match url.param("grpc_port") {
            None => None,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => Some(port),
                _ => {
                    return Err(url.invalid(format!(
                        "parameter `grpc_port`: `{port}` is not a port in 1..=65535"
                    )));
                }
            },
        };
        let namespace = text("namespace", DEFAULT_NAMESPACE)?;
        let cluster = text("cluster", DEFAULT_CLUSTER)?;
        Ok(Self {
            network: NetworkSettings::from_url(url, DEFAULT_PORT, "Nacos credentials")?,
            grpc_port,
            namespace,
            group,
            cluster,
        })
    }
}

/// A registry client backed by Nacos through nacos-sdk (see the module documentation).
///
/// Dropping it without [`Registry::close`] starts the same withdrawal in the background
/// (on the current tokio runtime, if any).
pub struct NacosRegistry {
    shared: Arc<Shared>,
}

struct Shared {
    /// Its URL, subscriptions and background tasks, and whether it was closed.
    core: ClientLifetime,
    config: NacosConfig,
    /// `None` once closed.
    naming: parking_lot::Mutex<Option<NamingService>>,
    /// `service name#instance id` -> (service name, what was registered).
    registered: Mutex<BTreeMap<String, (String, ServiceInstance)>>,
    /// One SDK subscription per service name, shared by this client's subscriptions.
    watches: Mutex<HashMap<String, ServiceWatch>>,
    revision: AtomicU64,
    /// Bumped when the connection came back: every subscription reads again.
    resync: watch::Sender<u64>,
    /// Set by the first `shutdown`: the withdrawal runs once, and no call starts after it.
    closing: AtomicBool,
    /// The SDK's disk cache; removed with the client.
    _cache_dir: tempfile::TempDir,
}

struct ServiceWatch {
    signal: Arc<ChangeSignal>,
    users: usize,
}

/// The SDK push listener: counts change reports, which wake the subscriptions.
struct ChangeSignal {
    changes: watch::Sender<u64>,
}

impl NamingEventListener for ChangeSignal {
    fn event(&self, _event: Arc<NamingChangeEvent>) {
        self.changes
            .send_modify(|count| *count = count.wrapping_add(1));
    }
}

impl NacosRegistry {
    /// Connects to the Nacos servers of `url` (and logs in when it has credentials).
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] (see [`NacosConfig::from_url`]);
    /// [`RegistryError::Unreachable`] when no server answers within `connect_timeout`;
    /// [`RegistryError::Operation`] when the server refuses a request (e.g. bad
    /// credentials) or the SDK cannot start.
    pub async fn connect(url: &RegistryUrl) -> Result<Self, RegistryError> {
        let config = NacosConfig::from_url(url)?;
        Self::with_config(url.redacted().to_owned(), config).await
    }

    /// Connects with explicit settings; `url` (credentials redacted) names the registry in
    /// logs and errors.
    ///
    /// # Errors
    /// As [`NacosRegistry::connect`].
    pub async fn with_config(url: String, config: NacosConfig) -> Result<Self, RegistryError> {
        let core = ClientLifetime::new(url);
        let cache_dir = tempfile::Builder::new()
            .prefix("rpc-nacos-cache-")
            .tempdir()
            .map_err(|error| {
                core.failed(
                    "connect",
                    format!("cannot create the SDK cache directory: {error}"),
                )
            })?;
        let mut props = ClientProps::new()
            .server_addr(config.network.endpoints.join(","))
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
        if let Some((user, password)) = &config.network.credentials {
            builder = builder.with_auth_plugin(Arc::new(login::HttpLogin::new(
                user.clone(),
                password.clone(),
                config.network.connect_timeout,
            )));
        }
        let deadline = tokio::time::Instant::now() + config.network.connect_timeout;
        let unreachable = |source: rpc_core::BoxError| RegistryError::Unreachable {
            url: core.url.clone(),
            timeout: config.network.connect_timeout,
            source,
        };
        // `build` checks the connection with a health request and logs in.
        let naming = bounded(config.network.connect_timeout, builder.build())
            .await
            .map_err(|failure| unreachable(failure.into_source()))?;
        // A read proves the credentials (and the namespace) are accepted.
        let left = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_millis(100));
        match bounded(
            left,
            naming.get_service_list(1, 1, Some(config.group.clone())),
        )
        .await
        {
            Ok(_) => {}
            Err(Failure::Failed(error @ nacos_sdk::api::error::Error::ErrResponse(..))) => {
                return Err(core.failed("connect", error));
            }
            Err(failure) => return Err(unreachable(failure.into_source())),
        }
        tracing::debug!(url = %core.url, "connected to Nacos");
        let shared = Arc::new(Shared {
            core,
            config,
            naming: parking_lot::Mutex::new(Some(naming.clone())),
            registered: Mutex::new(BTreeMap::new()),
            watches: Mutex::new(HashMap::new()),
            revision: AtomicU64::new(1),
            resync: watch::channel(0).0,
            closing: AtomicBool::new(false),
            _cache_dir: cache_dir,
        });
        shared
            .core
            .tasks
            .spawn(probe_connection(Arc::downgrade(&shared), naming));
        Ok(Self { shared })
    }
}

impl fmt::Debug for NacosRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NacosRegistry")
            .field("url", &self.shared.core.url)
            .finish_non_exhaustive()
    }
}

impl Drop for NacosRegistry {
    fn drop(&mut self) {
        if self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        // The SDK's connection would keep this client's instances alive: withdraw them.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let shared = self.shared.clone();
                runtime.spawn(async move {
                    if let Err(error) = shared.shutdown().await {
                        tracing::warn!(%error, "withdrawing a dropped Nacos client failed");
                    }
                });
            }
            Err(_) => {
                self.shared.core.closed.cancel();
                tracing::warn!(url = %self.shared.core.url, "Nacos client dropped outside a tokio runtime without close(); its instances stay until its connection ends");
            }
        }
    }
}

/// `ServiceInstance` of `instance` in `cluster`, carrying its JSON.
fn to_nacos(
    instance: &Instance,
    name: &str,
    cluster: &str,
) -> Result<ServiceInstance, serde_json::Error> {
    let mut metadata: HashMap<String, String> = instance.metadata.clone().into_iter().collect();
    metadata.insert(
        INSTANCE_METADATA_KEY.to_owned(),
        serde_json::to_string(instance)?,
    );
    Ok(ServiceInstance {
        instance_id: None,
        ip: instance.host.clone(),
        port: i32::from(instance.port),
        weight: f64::from(instance.weight),
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: Some(cluster.to_owned()),
        service_name: Some(name.to_owned()),
        metadata,
    })
}

/// The instance a Nacos instance stands for: its JSON when it carries one (with the weight
/// Nacos holds, which an operator may have changed), else one built from Nacos' fields.
fn from_nacos(service: &ServiceKey, nacos: ServiceInstance) -> Option<Instance> {
    let weight = if nacos.weight.is_finite() && nacos.weight > 0.0 {
        nacos.weight.round().min(f64::from(u32::MAX)) as u32
    } else {
        0
    };
    if let Some(json) = nacos.metadata.get(INSTANCE_METADATA_KEY) {
        match serde_json::from_str::<Instance>(json) {
            Ok(mut instance) if &instance.service == service => {
                instance.weight = weight;
                return Some(instance);
            }
            Ok(instance) => {
                tracing::warn!(instance = %instance.id, of = %instance.service, in_service = %service, "ignoring a Nacos instance of another service");
                return None;
            }
            Err(error) => {
                tracing::warn!(ip = %nacos.ip, port = nacos.port, %error, "a Nacos instance has unreadable rpc metadata; using Nacos' fields");
            }
        }
    }
    let port = u16::try_from(nacos.port).ok().filter(|port| *port > 0)?;
    let id = nacos
        .instance_id
        .clone()
        .unwrap_or_else(|| rpc_core::format_authority(&nacos.ip, port));
    let mut metadata = nacos.metadata;
    metadata.remove(INSTANCE_METADATA_KEY);
    Some(Instance {
        service: service.clone(),
        host: nacos.ip,
        port,
        id: InstanceId::new(id),
        weight,
        metadata: metadata.into_iter().collect(),
        start_time_ms: 0,
    })
}

impl Shared {
    fn naming(&self) -> Result<NamingService, RegistryError> {
        match &*self.naming.lock() {
            Some(naming) if !self.closing.load(Ordering::Acquire) => Ok(naming.clone()),
            _ => Err(self.core.closed_error()),
        }
    }

    fn next_revision(&self) -> u64 {
        self.revision.fetch_add(1, Ordering::Relaxed)
    }

    /// The server's current instances of `service` (enabled and healthy ones).
    async fn read(
        &self,
        naming: &NamingService,
        name: &str,
        service: &ServiceKey,
    ) -> Result<Vec<Instance>, Failure<nacos_sdk::api::error::Error>> {
        let all = naming.get_all_instances(
            name.to_owned(),
            Some(self.config.group.clone()),
            Vec::new(),
            false,
        );
        let all = bounded(self.config.network.request_timeout, all).await?;
        Ok(all
            .into_iter()
            .filter(|nacos| nacos.enabled && nacos.healthy)
            .filter_map(|nacos| from_nacos(service, nacos))
            .collect())
    }

    /// A change signal for `name`, subscribing in the SDK for its first user.
    async fn watch(
        &self,
        naming: &NamingService,
        name: &str,
    ) -> Result<watch::Receiver<u64>, RegistryError> {
        let mut watches = self.watches.lock().await;
        if let Some(watch) = watches.get_mut(name) {
            watch.users += 1;
            return Ok(watch.signal.changes.subscribe());
        }
        let signal = Arc::new(ChangeSignal {
            changes: watch::channel(0).0,
        });
        let changes = signal.changes.subscribe();
        let subscribe = naming.subscribe(
            name.to_owned(),
            Some(self.config.group.clone()),
            Vec::new(),
            signal.clone() as Arc<dyn NamingEventListener>,
        );
        bounded(self.config.network.request_timeout, subscribe)
            .await
            .map_err(|failure| failure.into_operation(&self.core.url, "subscribe"))?;
        watches.insert(name.to_owned(), ServiceWatch { signal, users: 1 });
        Ok(changes)
    }

    /// Gives back a change signal; the SDK subscription ends with its last user.
    async fn unwatch(&self, naming: &NamingService, name: &str) {
        let mut watches = self.watches.lock().await;
        let Some(watch) = watches.get_mut(name) else {
            return;
        };
        watch.users -= 1;
        if watch.users > 0 {
            return;
        }
        let Some(watch) = watches.remove(name) else {
            return;
        };
        let unsubscribe = naming.unsubscribe(
            name.to_owned(),
            Some(self.config.group.clone()),
            Vec::new(),
            watch.signal as Arc<dyn NamingEventListener>,
        );
        if let Err(failure) = bounded(self.config.network.request_timeout, unsubscribe).await {
            tracing::warn!(url = %self.core.url, service = %name, error = %failure.into_source(), "Nacos unsubscribe failed");
        }
    }

    /// Writes every registration again (after the connection came back; idempotent).
    async fn register_again(&self, naming: &NamingService) {
        let registered = self.registered.lock().await;
        for (name, nacos) in registered.values() {
            let register = naming.register_instance(
                name.clone(),
                Some(self.config.group.clone()),
                nacos.clone(),
            );
            if let Err(failure) = bounded(self.config.network.request_timeout, register).await {
                tracing::warn!(url = %self.core.url, service = %name, error = %failure.into_source(), "registering again failed; the SDK retries");
            }
        }
    }

    /// Ends every subscription and withdraws every registration; idempotent.
    async fn shutdown(&self) -> Result<(), RegistryError> {
        if self.closing.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.core.stop();
        // Each subscription gives back its SDK subscription as it stops.
        self.core
            .wait_for_tasks(self.config.network.request_timeout * 2)
            .await;
        let Some(naming) = self.naming.lock().take() else {
            return Ok(());
        };
        let mut first_error = None;
        let registered = std::mem::take(&mut *self.registered.lock().await);
        for (name, nacos) in registered.into_values() {
            let deregister =
                naming.deregister_instance(name, Some(self.config.group.clone()), nacos);
            if let Err(failure) = bounded(self.config.network.request_timeout, deregister).await {
                first_error.get_or_insert(failure.into_operation(&self.core.url, "close"));
            }
        }
        let leftover: Vec<String> = self.watches.lock().await.keys().cloned().collect();
        for name in leftover {
            self.unwatch(&naming, &name).await;
        }
        tracing::debug!(url = %self.core.url, "Nacos registry closed");
        first_error.map_or(Ok(()), Err)
    }
}

/// The probe task (see "Presence" above). Holds the client weakly so that dropping the
/// client ends it.
async fn probe_connection(shared: std::sync::Weak<Shared>, naming: NamingService) {
    let Some(cancel) = shared.upgrade().map(|shared| shared.core.closed.clone()) else {
        return;
    };
    let mut failing = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(PROBE_INTERVAL) => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let busy =
            !shared.registered.lock().await.is_empty() || shared.core.subscriptions.len() > 0;
        if !busy {
            continue;
        }
        let probe = naming.get_service_list(1, 1, Some(shared.config.group.clone()));
        let started = tokio::time::Instant::now();
        let answered = tokio::select! {
            () = cancel.cancelled() => return,
            answered = bounded(shared.config.network.request_timeout, probe) => answered.is_ok(),
        };
        // A probe that waited for the SDK to reconnect answers late, not with an error.
        let reconnected = failing || started.elapsed() > PROBE_INTERVAL;
        if answered && reconnected {
            tracing::info!(url = %shared.core.url, "Nacos answers again; registering and reading again");
            shared.register_again(&naming).await;
            shared
                .resync
                .send_modify(|count| *count = count.wrapping_add(1));
        } else if !answered && !failing {
            tracing::warn!(url = %shared.core.url, "Nacos does not answer; keeping the last known instances");
        }
        failing = !answered;
    }
}

/// What one subscription's loop works with.
struct Follow {
    id: SubscriptionId,
    naming: NamingService,
    /// The Nacos service name.
    name: String,
    service: ServiceKey,
    changes: watch::Receiver<u64>,
    cancel: CancellationToken,
    publisher: SnapshotPublisher,
}

/// One subscription's loop: read the service again after every change report.
async fn watch_service(shared: Arc<Shared>, follow: Follow) {
    let Follow {
        id,
        naming,
        name,
        service,
        mut changes,
        cancel,
        mut publisher,
    } = follow;
    let mut resync = shared.resync.subscribe();
    let mut backoff = Backoff::new();
    let mut stale = false;
    loop {
        if !stale {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = publisher.closed() => break,
                changed = changes.changed() => if changed.is_err() { break },
                changed = resync.changed() => if changed.is_err() { break },
            }
        }
        // Reports that arrive during the read cause one more read.
        changes.borrow_and_update();
        resync.borrow_and_update();
        let read = tokio::select! {
            () = cancel.cancelled() => break,
            read = shared.read(&naming, &name, &service) => read,
        };
        match read {
            Ok(instances) => {
                publisher.publish(shared.next_revision(), instances);
                stale = false;
                backoff.reset();
            }
            Err(failure) => {
                tracing::debug!(url = %shared.core.url, service = %name, error = %failure.into_source(), "Nacos read failed; keeping the last known instances");
                stale = true;
                if !backoff.wait(&cancel).await {
                    break;
                }
            }
        }
    }
    shared.unwatch(&naming, &name).await;
    shared.core.subscriptions.forget(id);
}

#[async_trait]
impl Registry for NacosRegistry {
    fn url(&self) -> &str {
        &self.shared.core.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        let shared = &self.shared;
        let naming = shared.naming()?;
        let name = service_name(&instance.service);
        let nacos = to_nacos(instance, &name, &shared.config.cluster)
            .map_err(|error| shared.core.failed("register", error))?;
        let mut registered = shared.registered.lock().await;
        let register = naming.register_instance(
            name.clone(),
            Some(shared.config.group.clone()),
            nacos.clone(),
        );
        let result = bounded(shared.config.network.request_timeout, register).await;
        // Even when the answer was an error the SDK keeps retrying the registration: keep it
        // so that unregister and close withdraw it.
        registered.insert(format!("{name}#{}", instance.id), (name, nacos));
        result.map_err(|failure| failure.into_operation(&shared.core.url, "register"))?;
        tracing::debug!(url = %shared.core.url, instance = %instance.id, service = %instance.service, "registered in Nacos");
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        let shared = &self.shared;
        let naming = shared.naming()?;
        let name = service_name(&instance.service);
        let mut registered = shared.registered.lock().await;
        let Some((name, nacos)) = registered.remove(&format!("{name}#{}", instance.id)) else {
            return Ok(());
        };
        let deregister = naming.deregister_instance(name, Some(shared.config.group.clone()), nacos);
        bounded(shared.config.network.request_timeout, deregister)
            .await
            .map_err(|failure| failure.into_operation(&shared.core.url, "unregister"))?;
        tracing::debug!(url = %shared.core.url, instance = %instance.id, service = %instance.service, "unregistered from Nacos");
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        let shared = &self.shared;
        let naming = shared.naming()?;
        let name = service_name(service);
        // Listen first, then read: a change after the read is always reported.
        let changes = shared.watch(&naming, &name).await?;
        let first = match shared.read(&naming, &name, service).await {
            Ok(first) => first,
            Err(failure) => {
                shared.unwatch(&naming, &name).await;
                return Err(failure.into_operation(&shared.core.url, "subscribe"));
            }
        };
        let follow = |id, cancel, publisher| {
            let follow = Follow {
                id,
                naming,
                name,
                service: service.clone(),
                changes,
                cancel,
                publisher,
            };
            watch_service(shared.clone(), follow)
        };
        Ok(shared
            .core
            .start_subscription(service, shared.next_revision(), first, follow))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.shared.core.subscriptions.close(id)
    }

    async fn close(&self) -> Result<(), RegistryError> {
        self.shared.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;

    fn config(url: &str) -> Result<NacosConfig, String> {
        testing::parse(url, NacosConfig::from_url)
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = config("nacos://127.0.0.1").unwrap();
        assert_eq!(plain.network.endpoints, ["127.0.0.1:8848"]);
        assert_eq!(
            (
                plain.namespace.as_str(),
                plain.group.as_str(),
                plain.cluster.as_str()
            ),
            ("public", "DEFAULT_GROUP", "DEFAULT")
        );
        assert_eq!(plain.grpc_port, None);
        assert!(plain.network.credentials.is_none());

        let full = config(
            "nacos://u:p@a:1,b:2?namespace=dev&group=G&cluster=C&grpc_port=9&connect_timeout=1s&request_timeout=2s",
        )
        .unwrap();
        assert_eq!(full.network.endpoints, ["a:1", "b:2"]);
        assert_eq!(full.network.credentials, Some(("u".into(), "p".into())));
        assert_eq!(
            (
                full.namespace.as_str(),
                full.group.as_str(),
                full.cluster.as_str()
            ),
            ("dev", "G", "C")
        );
        assert_eq!(full.grpc_port, Some(9));
        assert_eq!(full.network.connect_timeout, Duration::from_secs(1));
        assert_eq!(full.network.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            config("nacos://h?namespac=x")
                .unwrap_err()
                .contains("unknown parameter `namespac`")
        );
        assert!(
            config("nacos://h?group=")
                .unwrap_err()
                .contains("parameter `group`")
        );
        assert!(
            config("nacos://h?group=a@@b")
                .unwrap_err()
                .contains("parameter `group`")
        );
        assert!(
            config("nacos://h?cluster=%20")
                .unwrap_err()
                .contains("parameter `cluster`")
        );
        assert!(
            config("nacos://h?grpc_port=0")
                .unwrap_err()
                .contains("parameter `grpc_port`")
        );
        assert!(
            config("nacos://h?grpc_port=x")
                .unwrap_err()
                .contains("parameter `grpc_port`")
        );
        assert!(
            config("nacos://h?request_timeout=0s")
                .unwrap_err()
                .contains("parameter `request_timeout`")
        );
        assert!(
            config("nacos://")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            config("nacos://user@h")
                .unwrap_err()
                .contains("user:password@")
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        testing::assert_password_hidden(
            NacosConfig::from_url,
            "nacos://nacos:hunter2@h?group=",
            "nacos://nacos:hunter2@h",
        );
        let login = login::HttpLogin::new("nacos".into(), "hunter2".into(), Duration::from_secs(1));
        assert!(!format!("{login:?}").contains("hunter2"));
    }

    #[test]
    fn instances_round_trip_through_nacos_fields() {
        let service = ServiceKey::new("a.B").with_version("1").with_group("g");
        let instance = Instance::new(service.clone(), "10.0.0.1", 8080)
            .with_weight(7)
            .with_metadata("zone", "z1");
        let nacos = to_nacos(&instance, &service_name(&service), "C").unwrap();
        assert_eq!(
            (nacos.ip.as_str(), nacos.port, nacos.weight),
            ("10.0.0.1", 8080, 7.0)
        );
        assert_eq!(nacos.metadata.get("zone").map(String::as_str), Some("z1"));
        assert_eq!(from_nacos(&service, nacos.clone()), Some(instance.clone()));

        // An operator changed the weight in Nacos.
        let mut reweighted = nacos.clone();
        reweighted.weight = 3.0;
        assert_eq!(from_nacos(&service, reweighted).unwrap().weight, 3);

        // Another service's instance never leaks in.
        assert_eq!(from_nacos(&ServiceKey::new("other"), nacos), None);

        // An instance registered by something else than rpc.
        let foreign = ServiceInstance {
            ip: "10.0.0.2".into(),
            port: 9000,
            weight: 1.0,
            metadata: HashMap::from([("k".to_owned(), "v".to_owned())]),
            ..ServiceInstance::default()
        };
        let read = from_nacos(&service, foreign).unwrap();
        assert_eq!(
            (read.host.as_str(), read.port, read.weight),
            ("10.0.0.2", 9000, 1)
        );
        assert_eq!(read.id.as_str(), "10.0.0.2:9000");
        assert_eq!(read.metadata.get("k").map(String::as_str), Some("v"));
    }

    #[test]
    fn service_names_keep_group_and_version_apart() {
        let plain = service_name(&ServiceKey::new("a.B"));
        let versioned = service_name(&ServiceKey::new("a.B").with_version("1"));
        let grouped = service_name(&ServiceKey::new("a.B").with_group("x@@y"));
        assert_ne!(plain, versioned);
        assert!(!grouped.contains("@@"), "{grouped}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_within_the_connect_timeout() {
        testing::assert_unreachable_in_time(
            "nacos://nacos",
            Duration::from_millis(500),
            |url| async move { NacosRegistry::connect(&url).await },
        )
        .await;
    }
}
