//! The etcd v3 backend: `etcd://[user:pass@]host:port[,host:port...][?ttl=10s&prefix=/rpc]`.
//!
//! # Layout
//! One instance is one key, its value the instance's JSON:
//! `<prefix>/<service.path_segment()>/providers/<instance id>`, e.g.
//! `/rpc/helloworld.Greeter:1.0.0/providers/10.0.0.1:50051-1f2e...`. The path segment is
//! unique per interface, group and version, so a prefix read of
//! `<prefix>/<segment>/providers/` is exactly one service.
//!
//! # Presence
//! Every key this client writes is attached to one lease of `ttl` (default 10 s) that a
//! background task keeps alive (a keep-alive every third of the TTL). A process that dies
//! stops renewing it and etcd deletes its keys when the TTL runs out. When the lease is lost
//! anyway (etcd unreachable for longer than the TTL, or restarted without its data), the
//! task grants a new lease as soon as etcd answers again and writes every registration
//! under it; a key left by the old lease is simply overwritten.
//!
//! # Subscriptions
//! A subscription reads the prefix, then watches it from the revision of that read plus
//! one, so no change between the read and the watch is lost. Snapshot revisions are etcd
//! revisions. When the watch breaks (connection lost, revision compacted) the loop reads
//! and watches again after a short backoff; in between the consumer keeps the last set.
//!
//! # Parameters
//! `ttl` (whole seconds, at least 1 s, default 10 s), `prefix` (default `/rpc`),
//! `connect_timeout` (default 3 s: bound on connecting at start-up), `request_timeout`
//! (default 3 s: bound on every later request). The port defaults to 2379. Credentials in
//! the URL enable etcd authentication; they never appear in logs or errors.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, ConnectOptions, EventType, GetOptions, PutOptions, WatchOptions};
use rpc_core::{
    BoxError, Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId,
};
use tokio::sync::{Mutex, watch};

use crate::etcd_error::EtcdError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::network::{ClientCore, NetworkSettings};
use crate::retry::{Backoff, Failure, bounded};
use crate::snapshots::{SnapshotPublisher, to_revision};
use crate::url::RegistryUrl;

/// Port used when the URL gives none.
pub const DEFAULT_PORT: u16 = 2379;
/// Lease time-to-live when the URL has no `ttl`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// Key prefix when the URL has no `prefix`.
pub const DEFAULT_PREFIX: &str = "/rpc";

/// The query parameters of an `etcd://` URL besides [`NetworkSettings::PARAMS`].
const PARAMS: [&str; 2] = ["ttl", "prefix"];

/// Settings of an [`EtcdRegistry`], from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// The cluster members, the credentials (for etcd authentication) and the time bounds;
    /// `connect_timeout` bounds connecting and the first request.
    pub network: NetworkSettings,
    /// Lease time-to-live: how long after its process dies an instance disappears.
    pub ttl: Duration,
    /// Key prefix, without a trailing `/` (`/rpc`).
    pub prefix: String,
}

impl EtcdConfig {
    /// Reads the settings of an `etcd://` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault: an unknown parameter, a duration that
    /// does not parse, a `ttl` under one second or not whole seconds, a `prefix` that does
    /// not start with `/`, then those of [`NetworkSettings::from_url`] (a user without
    /// password, no host, a zero timeout).
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        NetworkSettings::expect_params(url, &PARAMS)?;
        let ttl = url.duration_param("ttl", DEFAULT_TTL)?;
        if ttl < Duration::from_secs(1) || ttl.subsec_nanos() != 0 {
            return Err(url.invalid(format!(
                "parameter `ttl`: {ttl:?} is not a whole number of seconds of at least 1s (etcd leases count seconds)"
            )));
        }
        let prefix = url.param("prefix").unwrap_or(DEFAULT_PREFIX);
        if !prefix.starts_with('/') {
            return Err(url.invalid(format!(
                "parameter `prefix`: `{prefix}` must start with `/`"
            )));
        }
        Ok(Self {
            network: NetworkSettings::from_url(url, DEFAULT_PORT, "etcd credentials")?,
            ttl,
            prefix: prefix.trim_end_matches('/').to_owned(),
        })
    }
}

/// A registry client backed by etcd v3 (see the module documentation).
///
/// Dropping it without [`Registry::close`] stops the lease keep-alive, so its instances
/// disappear after the TTL, as if the process had died.
pub struct EtcdRegistry {
    shared: Arc<Shared>,
}

struct Shared {
    /// Its URL, subscriptions and background tasks, and whether it was closed.
    core: ClientCore,
    client: Client,
    prefix: String,
    ttl: Duration,
    request_timeout: Duration,
    /// Registrations and the lease they hang on; one lock so that a lease renewal and a
    /// registration never interleave.
    leased: Mutex<Leased>,
    /// The current lease, for the keep-alive task.
    lease_tx: watch::Sender<Option<i64>>,
}

#[derive(Default)]
struct Leased {
    lease: Option<i64>,
    /// key -> JSON value of every instance registered through this client.
    registered: BTreeMap<String, String>,
}

impl EtcdRegistry {
    /// Connects to the etcd cluster of `url` and checks that it answers.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] (see [`EtcdConfig::from_url`]);
    /// [`RegistryError::Unreachable`] when no member answers within `connect_timeout`;
    /// [`RegistryError::Operation`] when etcd answers with an error (e.g. bad credentials).
    pub async fn connect(url: &RegistryUrl) -> Result<Self, RegistryError> {
        let config = EtcdConfig::from_url(url)?;
        Self::with_config(url.redacted().to_owned(), config).await
    }

    /// Connects with explicit settings; `url` (credentials redacted) names the registry in
    /// logs and errors.
    ///
    /// # Errors
    /// As [`EtcdRegistry::connect`].
    pub async fn with_config(url: String, config: EtcdConfig) -> Result<Self, RegistryError> {
        let network = &config.network;
        let mut options = ConnectOptions::new()
            .with_connect_timeout(network.connect_timeout)
            // etcd's default keep-alive policy rejects pings more often than every 5 s.
            .with_keep_alive(Duration::from_secs(10), network.request_timeout);
        if let Some((user, password)) = &network.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
        let unreachable = |source: BoxError| RegistryError::Unreachable {
            url: url.clone(),
            timeout: network.connect_timeout,
            source,
        };
        let deadline = Instant::now() + network.connect_timeout;
        // `connect` only builds the channel (and authenticates when there are credentials);
        // the count-only read proves the cluster answers.
        let mut client = match call(
            network.connect_timeout,
            Client::connect(&network.endpoints, Some(options)),
        )
        .await
        {
            Ok(client) => client,
            Err(Failure::Failed(error)) if !is_unavailable(&error) => {
                return Err(Failure::Failed(error).into_operation(&url, "connect"));
            }
            Err(failure) => return Err(unreachable(failure.into_source())),
        };
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let probe = client.get(
            config.prefix.clone(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        );
        match call(left, probe).await {
            Ok(_) => {}
            Err(Failure::Failed(error)) if !is_unavailable(&error) => {
                return Err(Failure::Failed(error).into_operation(&url, "connect"));
            }
            Err(failure) => return Err(unreachable(failure.into_source())),
        }
        let (lease_tx, lease_rx) = watch::channel(None);
        let shared = Arc::new(Shared {
            core: ClientCore::new(url),
            client,
            prefix: config.prefix,
            ttl: config.ttl,
            request_timeout: config.network.request_timeout,
            leased: Mutex::new(Leased::default()),
            lease_tx,
        });
        shared
            .core
            .tasks
            .spawn(keep_lease_alive(shared.clone(), lease_rx));
        tracing::debug!(url = %shared.core.url, "connected to etcd");
        Ok(Self { shared })
    }

    /// The key prefix under which the instances of `service` live (ends with `/`).
    pub fn service_prefix(&self, service: &ServiceKey) -> String {
        self.shared.service_prefix(service)
    }

    /// The id of the lease this client's keys hang on, once something was registered.
    pub async fn lease_id(&self) -> Option<i64> {
        self.shared.leased.lock().await.lease
    }
}

impl fmt::Debug for EtcdRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdRegistry")
            .field("url", &self.shared.core.url)
            .finish_non_exhaustive()
    }
}

impl Drop for EtcdRegistry {
    fn drop(&mut self) {
        self.shared.core.closed.cancel();
    }
}

/// [`bounded`] for an etcd-client request, its error printed on one line.
async fn call<T>(
    bound: Duration,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Failure<EtcdError>> {
    bounded(bound, async { request.await.map_err(EtcdError) }).await
}

/// Whether `error` means "no server answered" rather than "the server said no".
fn is_unavailable(error: &EtcdError) -> bool {
    match &error.0 {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
        ),
        _ => false,
    }
}

/// Whether `error` says the lease a request named no longer exists.
fn is_lease_gone(error: &EtcdError) -> bool {
    match &error.0 {
        etcd_client::Error::GRpcStatus(status) => status.code() == tonic::Code::NotFound,
        etcd_client::Error::LeaseKeepAliveError(message) => message.contains("not found"),
        _ => false,
    }
}

impl Shared {
    fn service_prefix(&self, service: &ServiceKey) -> String {
        format!("{}/{}/providers/", self.prefix, service.path_segment())
    }

    fn key(&self, instance: &Instance) -> String {
        format!("{}{}", self.service_prefix(&instance.service), instance.id)
    }

    fn ttl_seconds(&self) -> i64 {
        i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX)
    }

    async fn lock_leased(
        &self,
        operation: &'static str,
    ) -> Result<tokio::sync::MutexGuard<'_, Leased>, RegistryError> {
        tokio::time::timeout(self.request_timeout, self.leased.lock())
            .await
            .map_err(|_| {
                self.core.failed(
                    operation,
                    format!(
                        "lease renewal still in progress after {:?}",
                        self.request_timeout
                    ),
                )
            })
    }

    /// Grants a new lease, writes every registration under it and makes it current.
    async fn renew(&self, leased: &mut Leased) -> Result<i64, Failure<EtcdError>> {
        let mut client = self.client.clone();
        let granted = call(
            self.request_timeout,
            client.lease_grant(self.ttl_seconds(), None),
        )
        .await?;
        let lease = granted.id();
        for (key, value) in &leased.registered {
            let options = PutOptions::new().with_lease(lease);
            let put = call(
                self.request_timeout,
                client.put(key.clone(), value.clone(), Some(options)),
            )
            .await;
            if let Err(failure) = put {
                // Do not leave a half-filled lease behind; the next attempt grants anew.
                let _ = call(self.request_timeout, client.lease_revoke(lease)).await;
                return Err(failure);
            }
        }
        let old = leased.lease.replace(lease);
        self.lease_tx.send_replace(Some(lease));
        if let Some(old) = old {
            // Best effort: the old lease no longer holds any key; let it go now rather
            // than when its TTL runs out.
            let _ = call(self.request_timeout, client.lease_revoke(old)).await;
        }
        tracing::info!(url = %self.core.url, lease, registrations = leased.registered.len(), "etcd lease granted");
        Ok(lease)
    }

    /// Renews the lease after `lost` was found gone, unless someone already did.
    async fn renew_after_loss(&self, lost: i64) -> Result<(), RegistryError> {
        let mut leased = self.lock_leased("renew lease").await?;
        if leased.lease != Some(lost) || self.core.closed.is_cancelled() {
            return Ok(());
        }
        if leased.registered.is_empty() {
            // Nothing to keep: the next registration grants a lease.
            leased.lease = None;
            self.lease_tx.send_replace(None);
            return Ok(());
        }
        self.renew(&mut leased)
            .await
            .map(|_| ())
            .map_err(|failure| failure.into_operation(&self.core.url, "renew lease"))
    }

    /// Keeps `lease` alive until it is lost or replaced.
    async fn keep_alive(
        &self,
        lease: i64,
        lease_rx: &mut watch::Receiver<Option<i64>>,
    ) -> KeepAliveEnd {
        let interval = (self.ttl / 3).max(Duration::from_millis(500));
        let mut backoff = Backoff::new();
        // The lease was granted or renewed moments ago; etcd forgets it `ttl` after the
        // last renewal it received.
        let mut renewed_at = Instant::now();
        loop {
            if *lease_rx.borrow_and_update() != Some(lease) {
                return KeepAliveEnd::Replaced;
            }
            if renewed_at.elapsed() >= self.ttl {
                return KeepAliveEnd::Lost;
            }
            let mut client = self.client.clone();
            let (mut keeper, mut stream) = match call(
                self.request_timeout,
                client.lease_keep_alive(lease),
            )
            .await
            {
                Ok(opened) => opened,
                Err(Failure::Failed(error)) if is_lease_gone(&error) => return KeepAliveEnd::Lost,
                Err(failure) => {
                    tracing::warn!(url = %self.core.url, lease, error = %failure.into_source(), "etcd lease keep-alive failed; retrying");
                    if !backoff.wait(&self.core.closed).await {
                        return KeepAliveEnd::Replaced;
                    }
                    continue;
                }
            };
            // Opening the stream renewed the lease once.
            renewed_at = Instant::now();
            backoff.reset();
            loop {
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    changed = lease_rx.changed() => {
                        if changed.is_err() || *lease_rx.borrow_and_update() != Some(lease) {
                            return KeepAliveEnd::Replaced;
                        }
                        continue;
                    }
                }
                if keeper.keep_alive().await.is_err() {
                    break;
                }
                match call(self.request_timeout, stream.message()).await {
                    Ok(Some(response)) if response.ttl() > 0 => renewed_at = Instant::now(),
                    Ok(Some(_)) => return KeepAliveEnd::Lost,
                    Ok(None) => break,
                    Err(failure) => {
                        tracing::warn!(url = %self.core.url, lease, error = %failure.into_source(), "etcd lease keep-alive interrupted");
                        break;
                    }
                }
            }
        }
    }

    /// Reads the instances of the service under `prefix`, with the revision of the read.
    async fn read(
        &self,
        prefix: &str,
    ) -> Result<(u64, BTreeMap<Vec<u8>, Instance>), Failure<EtcdError>> {
        let mut client = self.client.clone();
        let response = call(
            self.request_timeout,
            client.get(prefix, Some(GetOptions::new().with_prefix())),
        )
        .await?;
        let revision = response.header().map_or(0, |h| to_revision(h.revision()));
        let mut known = BTreeMap::new();
        for kv in response.kvs() {
            if let Some(instance) = self.decode(kv.key(), kv.value()) {
                known.insert(kv.key().to_vec(), instance);
            }
        }
        Ok((revision, known))
    }

    fn decode(&self, key: &[u8], value: &[u8]) -> Option<Instance> {
        match serde_json::from_slice::<Instance>(value) {
            Ok(instance) => Some(instance),
            Err(error) => {
                tracing::warn!(url = %self.core.url, key = %String::from_utf8_lossy(key), %error, "ignoring an etcd key that is not an instance");
                None
            }
        }
    }

    /// Follows the watch of `prefix` from `revision + 1`, publishing every change, until
    /// the watch breaks (its error) or the consumer drops its stream (`None`).
    async fn follow(
        &self,
        prefix: &str,
        known: &mut BTreeMap<Vec<u8>, Instance>,
        revision: &mut u64,
        publisher: &mut SnapshotPublisher,
    ) -> Option<BoxError> {
        let start = i64::try_from(*revision)
            .unwrap_or(i64::MAX)
            .saturating_add(1);
        let options = WatchOptions::new().with_prefix().with_start_revision(start);
        let mut client = self.client.clone();
        let mut watch = match call(self.request_timeout, client.watch(prefix, Some(options))).await
        {
            Ok(watch) => watch,
            Err(failure) => return Some(failure.into_source()),
        };
        loop {
            let message = tokio::select! {
                () = publisher.closed() => return None,
                message = watch.message() => message,
            };
            let response = match message {
                Ok(Some(response)) => response,
                Ok(None) => return Some("the watch stream ended".into()),
                Err(error) => return Some(error.into()),
            };
            if response.canceled() {
                return Some(
                    format!(
                        "etcd cancelled the watch (compacted at {}): {}",
                        response.compact_revision(),
                        response.cancel_reason()
                    )
                    .into(),
                );
            }
            if response.events().is_empty() {
                continue;
            }
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                match event.event_type() {
                    EventType::Put => match self.decode(kv.key(), kv.value()) {
                        Some(instance) => {
                            known.insert(kv.key().to_vec(), instance);
                        }
                        None => {
                            known.remove(kv.key());
                        }
                    },
                    EventType::Delete => {
                        known.remove(kv.key());
                    }
                }
                *revision = (*revision).max(to_revision(kv.mod_revision()));
            }
            if let Some(header) = response.header() {
                *revision = (*revision).max(to_revision(header.revision()));
            }
            publisher.publish(*revision, known.values().cloned().collect());
        }
    }
}

enum KeepAliveEnd {
    /// etcd no longer knows the lease (or will have forgotten it by now).
    Lost,
    /// Another lease became current, or the client is closing.
    Replaced,
}

/// The keep-alive task: renews the current lease, and grants a new one (rewriting every
/// registration) whenever it is lost.
async fn keep_lease_alive(shared: Arc<Shared>, mut lease_rx: watch::Receiver<Option<i64>>) {
    let cancel = shared.core.closed.clone();
    let mut backoff = Backoff::new();
    loop {
        let lease = loop {
            if let Some(lease) = *lease_rx.borrow_and_update() {
                break lease;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = lease_rx.changed() => if changed.is_err() { return },
            }
        };
        let end = tokio::select! {
            () = cancel.cancelled() => return,
            end = shared.keep_alive(lease, &mut lease_rx) => end,
        };
        if let KeepAliveEnd::Replaced = end {
            continue;
        }
        tracing::warn!(url = %shared.core.url, lease, "etcd lease lost; registering again under a new lease");
        loop {
            let renewed = tokio::select! {
                () = cancel.cancelled() => return,
                renewed = shared.renew_after_loss(lease) => renewed,
            };
            match renewed {
                Ok(()) => break,
                Err(error) => {
                    tracing::warn!(%error, "etcd lease renewal failed; retrying");
                    if !backoff.wait(&cancel).await {
                        return;
                    }
                }
            }
        }
        backoff.reset();
    }
}

/// One subscription's loop: publish the first read, then follow the watch, reading again
/// whenever it breaks.
async fn watch_service(
    shared: Arc<Shared>,
    id: SubscriptionId,
    prefix: String,
    cancel: CancellationToken,
    mut publisher: SnapshotPublisher,
    (mut revision, mut known): (u64, BTreeMap<Vec<u8>, Instance>),
) {
    let mut backoff = Backoff::new();
    loop {
        let broke = tokio::select! {
            () = cancel.cancelled() => break,
            error = shared.follow(&prefix, &mut known, &mut revision, &mut publisher) => match error {
                Some(error) => error,
                None => break,
            },
        };
        tracing::warn!(url = %shared.core.url, %prefix, error = %broke, "etcd watch interrupted; keeping the last known instances and retrying");
        loop {
            if !backoff.wait(&cancel).await || publisher.is_closed() {
                shared.core.subscriptions.forget(id);
                return;
            }
            match shared.read(&prefix).await {
                Ok((read_revision, read_known)) => {
                    revision = read_revision;
                    known = read_known;
                    publisher.publish(revision, known.values().cloned().collect());
                    backoff.reset();
                    break;
                }
                Err(failure) => {
                    tracing::debug!(url = %shared.core.url, %prefix, error = %failure.into_source(), "etcd read failed; retrying");
                }
            }
        }
    }
    shared.core.subscriptions.forget(id);
}

#[async_trait]
impl Registry for EtcdRegistry {
    fn url(&self) -> &str {
        &self.shared.core.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.shared.core.check_open()?;
        let shared = &self.shared;
        let key = shared.key(instance);
        let value = serde_json::to_string(instance)
            .map_err(|error| shared.core.failed("register", error))?;
        let mut leased = shared.lock_leased("register").await?;
        self.shared.core.check_open()?;
        let fail =
            |failure: Failure<EtcdError>| failure.into_operation(&shared.core.url, "register");
        let lease = match leased.lease {
            Some(lease) => lease,
            None => shared.renew(&mut leased).await.map_err(fail)?,
        };
        let put = |lease: i64| {
            let mut client = shared.client.clone();
            let (key, value) = (key.clone(), value.clone());
            async move {
                client
                    .put(key, value, Some(PutOptions::new().with_lease(lease)))
                    .await
            }
        };
        match call(shared.request_timeout, put(lease)).await {
            Ok(_) => {}
            Err(Failure::Failed(error)) if is_lease_gone(&error) => {
                // The keep-alive task has not noticed yet: renew here, then write.
                let lease = shared.renew(&mut leased).await.map_err(fail)?;
                call(shared.request_timeout, put(lease))
                    .await
                    .map_err(fail)?;
            }
            Err(failure) => return Err(fail(failure)),
        }
        leased.registered.insert(key, value);
        tracing::debug!(url = %shared.core.url, instance = %instance.id, service = %instance.service, "registered in etcd");
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.shared.core.check_open()?;
        let shared = &self.shared;
        let key = shared.key(instance);
        let mut leased = shared.lock_leased("unregister").await?;
        self.shared.core.check_open()?;
        if leased.registered.remove(&key).is_none() {
            return Ok(());
        }
        let mut client = shared.client.clone();
        call(shared.request_timeout, client.delete(key, None))
            .await
            .map_err(|failure| failure.into_operation(&shared.core.url, "unregister"))?;
        tracing::debug!(url = %shared.core.url, instance = %instance.id, service = %instance.service, "unregistered from etcd");
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.shared.core.check_open()?;
        let shared = &self.shared;
        let prefix = shared.service_prefix(service);
        let first = shared
            .read(&prefix)
            .await
            .map_err(|failure| failure.into_operation(&shared.core.url, "subscribe"))?;
        let (revision, instances) = (first.0, first.1.values().cloned().collect());
        let follow = |id, cancel, publisher| {
            watch_service(shared.clone(), id, prefix, cancel, publisher, first)
        };
        Ok(shared
            .core
            .start_subscription(service, revision, instances, follow))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.shared.core.subscriptions.close(id)
    }

    async fn close(&self) -> Result<(), RegistryError> {
        let shared = &self.shared;
        if shared.core.closed.is_cancelled() {
            return Ok(());
        }
        // Under this lock no renewal is half done, so the lease recorded is the one that
        // holds the keys (a renewal cancelled between its writes and its bookkeeping would
        // leave a new lease nobody revokes).
        let mut leased = shared.leased.lock().await;
        if shared.core.closed.is_cancelled() {
            return Ok(());
        }
        shared.core.stop();
        leased.registered.clear();
        let lease = leased.lease.take();
        drop(leased);
        // The tasks stop at their next await point; their watch and keep-alive streams are
        // dropped with them.
        shared.core.wait_for_tasks(shared.request_timeout).await;
        let Some(lease) = lease else {
            return Ok(());
        };
        // Revoking the lease deletes every key attached to it, atomically. A lease etcd no
        // longer knows has nothing left to release.
        let mut client = shared.client.clone();
        match call(shared.request_timeout, client.lease_revoke(lease)).await {
            Ok(_) => {}
            Err(Failure::Failed(error)) if is_lease_gone(&error) => {}
            Err(failure) => return Err(failure.into_operation(&shared.core.url, "close")),
        }
        tracing::debug!(url = %shared.core.url, lease, "etcd registry closed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::testing;

    fn config(url: &str) -> Result<EtcdConfig, String> {
        testing::parse(url, EtcdConfig::from_url)
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = config("etcd://127.0.0.1").unwrap();
        assert_eq!(plain.network.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(plain.ttl, DEFAULT_TTL);
        assert_eq!(plain.prefix, "/rpc");
        assert_eq!(plain.network.connect_timeout, crate::DEFAULT_TIMEOUT);
        assert!(plain.network.credentials.is_none());

        let full =
            config("etcd://u:p@a:1,b:2?ttl=3s&prefix=/x/&connect_timeout=500ms&request_timeout=2s")
                .unwrap();
        assert_eq!(full.network.endpoints, ["a:1", "b:2"]);
        assert_eq!(full.network.credentials, Some(("u".into(), "p".into())));
        assert_eq!(full.ttl, Duration::from_secs(3));
        assert_eq!(full.prefix, "/x");
        assert_eq!(full.network.connect_timeout, Duration::from_millis(500));
        assert_eq!(full.network.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            config("etcd://h?tll=3s")
                .unwrap_err()
                .contains("unknown parameter `tll`")
        );
        assert!(
            config("etcd://h?ttl=soon")
                .unwrap_err()
                .contains("parameter `ttl`")
        );
        assert!(
            config("etcd://h?ttl=500ms")
                .unwrap_err()
                .contains("parameter `ttl`")
        );
        assert!(
            config("etcd://h?ttl=1500ms")
                .unwrap_err()
                .contains("parameter `ttl`")
        );
        assert!(
            config("etcd://h?prefix=rpc")
                .unwrap_err()
                .contains("parameter `prefix`")
        );
        assert!(
            config("etcd://h?connect_timeout=0s")
                .unwrap_err()
                .contains("parameter `connect_timeout`")
        );
        assert!(
            config("etcd://h?request_timeout=x")
                .unwrap_err()
                .contains("parameter `request_timeout`")
        );
        assert!(
            config("etcd://")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            config("etcd://user@h")
                .unwrap_err()
                .contains("user:password@")
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        testing::assert_password_hidden(
            EtcdConfig::from_url,
            "etcd://root:hunter2@h?ttl=x",
            "etcd://root:hunter2@h",
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_within_the_connect_timeout() {
        testing::assert_unreachable_in_time(
            "etcd://root",
            Duration::from_millis(300),
            |url| async move { EtcdRegistry::connect(&url).await },
        )
        .await;
    }
}
