//! The keeper of a Nacos client's liveness: the SDK's connection (its `NamingService`,
//! its disk cache) and the registrations written through it; the probe that notices
//! when the connection comes back or falls silent is in `presence.rs`, the move to a new
//! connection when its server falls silent in `failover.rs`, the deregistrations owed
//! until the server answers them in `withdrawals.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, ServiceInstance};
use rpc_core::{InstanceId, RegistryError};
use tokio::sync::{Mutex, watch};
use tokio::time::Instant;

use crate::nacos::config::NacosConfig;
use crate::nacos::retired::{Registrations, RetiredConnections};
use crate::nacos::withdrawals::Withdrawals;
use crate::nacos::{sdk, servers};
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::bounded;

/// The SDK's connection of one Nacos client and the registrations written through it.
pub(super) struct ConnectionKeeper {
    /// Its client's URL (for logs and errors), subscriptions, closed token and tasks.
    pub(super) lifetime: Arc<ClientLifetime>,
    /// Group of every service of this client.
    pub(super) group: String,
    /// Bound on each request.
    pub(super) request_timeout: Duration,
    /// What an SDK connection is started from (again, at a failover).
    pub(super) config: NacosConfig,
    /// The SDK's connection and its generation; `None` once closed.
    pub(super) naming: parking_lot::Mutex<Option<(u64, NamingService)>>,
    /// `service name#instance id` -> (service name, what was registered). Taken before
    /// the connection is, by every call that writes through it: a failover (which holds
    /// it while it moves every registration) and a call never cross.
    pub(super) registered: Mutex<Registrations>,
    /// Connections a failover replaced, until they withdrew what they held.
    pub(super) retired: RetiredConnections,
    /// Deregistrations (of `unregister` and `release`) the server has not answered yet.
    /// Taken after `registered`.
    pub(super) withdrawals: Withdrawals,
    /// Set while the connection does not answer and registrations are to be written
    /// again once it does.
    reregistering: AtomicBool,
    /// Bumped when the connection came back: every subscription reads again.
    resync: watch::Sender<u64>,
    /// Set when closing starts: the withdrawal runs once, and no call starts after it.
    closing: AtomicBool,
    /// The SDK's disk cache (a folder per SDK connection after the first); removed with
    /// the client.
    pub(super) cache_dir: tempfile::TempDir,
}

/// The key of a registration in `ConnectionKeeper::registered`.
fn registration_key(name: &str, id: &InstanceId) -> String {
    format!("{name}#{id}")
}

impl ConnectionKeeper {
    /// Connects the SDK to the servers of `config` (logging in when it has credentials)
    /// and checks with a read that they accept this client; the caller starts the probe
    /// (`presence::probe`).
    ///
    /// # Errors
    /// [`RegistryError::Unreachable`] when no server answers within `connect_timeout`;
    /// [`RegistryError::Operation`] when the server refuses the read (e.g. bad
    /// credentials) or the SDK's cache directory cannot be created.
    pub(super) async fn connect(
        lifetime: Arc<ClientLifetime>,
        config: &NacosConfig,
    ) -> Result<Arc<Self>, RegistryError> {
        // The whole connect, the choice of servers included, within `connect_timeout`.
        let deadline = Instant::now() + config.network.connect_timeout;
        let cache_dir = tempfile::Builder::new()
            .prefix("rpc-nacos-cache-")
            .tempdir()
            .map_err(|error| {
                lifetime.failed(
                    "connect",
                    format!("cannot create the SDK cache directory: {error}"),
                )
            })?;
        let servers = servers::for_the_sdk(config).await;
        let naming =
            sdk::start(&lifetime.url, config, &servers, cache_dir.path(), deadline).await?;
        tracing::debug!(url = %lifetime.url, "connected to Nacos");
        let keeper = Arc::new(Self {
            lifetime,
            group: config.group.clone(),
            request_timeout: config.network.request_timeout,
            config: config.clone(),
            naming: parking_lot::Mutex::new(Some((0, naming.clone()))),
            registered: Mutex::new(BTreeMap::new()),
            retired: RetiredConnections::default(),
            withdrawals: Withdrawals::default(),
            reregistering: AtomicBool::new(false),
            resync: watch::channel(0).0,
            closing: AtomicBool::new(false),
            cache_dir,
        });
        Ok(keeper)
    }

    /// Its client's URL (credentials redacted), for logs.
    pub(super) fn url(&self) -> &str {
        &self.lifetime.url
    }

    /// Group of every service of this client.
    pub(super) fn group(&self) -> &str {
        &self.group
    }

    /// Cancelled when the client closes.
    pub(super) fn closed(&self) -> tokio_util::sync::CancellationToken {
        self.lifetime.closed.clone()
    }

    /// Whether the client has registrations, subscriptions or deregistrations owed
    /// (the probe runs for those).
    pub(super) async fn is_busy(&self) -> bool {
        self.has_registrations().await
            || self.lifetime.subscriptions.len() > 0
            || !self.withdrawals.is_empty().await
    }

    /// Whether the client has registrations.
    pub(super) async fn has_registrations(&self) -> bool {
        !self.registered.lock().await.is_empty()
    }

    /// Whether the connection stopped answering while there were registrations, and
    /// they are not written again yet.
    pub(super) fn is_reregistering(&self) -> bool {
        self.reregistering.load(Ordering::Relaxed)
    }

    /// Marks the registrations as waiting to be written again (`true`), or written.
    pub(super) fn set_reregistering(&self, waiting: bool) {
        self.reregistering.store(waiting, Ordering::Relaxed);
    }

    /// Tells every subscription to read again (the connection came back or was replaced).
    pub(super) fn resync_subscriptions(&self) {
        self.resync
            .send_modify(|count| *count = count.wrapping_add(1));
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
        self.current().map(|(_, naming)| naming)
    }

    /// As [`ConnectionKeeper::naming`], with its generation: 0 for the first SDK
    /// connection, one more for each that replaced it ([`ConnectionKeeper::fail_over`]).
    ///
    /// # Errors
    /// [`RegistryError::Closed`] once closing has started.
    pub(super) fn current(&self) -> Result<(u64, NamingService), RegistryError> {
        match &*self.naming.lock() {
            Some(current) if !self.is_closing() => Ok(current.clone()),
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
    /// [`RegistryError::Closed`] once closing has started.
    pub(super) async fn register(
        &self,
        id: &InstanceId,
        name: String,
        nacos: ServiceInstance,
    ) -> Result<(), RegistryError> {
        let mut registered = self.registered.lock().await;
        let naming = self.naming()?;
        let key = registration_key(&name, id);
        // Registered again: a deregistration still owed must not withdraw it.
        self.withdrawals.settle(&key).await;
        let register =
            naming.register_instance(name.clone(), Some(self.group.clone()), nacos.clone());
        let result = bounded(self.request_timeout, register).await;
        // Even when the answer was an error the SDK keeps retrying the registration: keep it
        // so that unregister and close withdraw it.
        registered.insert(key, (name, nacos));
        result.map_err(|failure| failure.into_operation(&self.lifetime.url, "register"))?;
        Ok(())
    }

    /// Deregisters instance `id` of the service `name` if it was registered through this
    /// client; `false` when it was not. The deregistration is owed until the server
    /// answers it (`withdrawals.rs`): one that fails is sent again at every probe.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] when the server fails the request or does not answer
    /// in time (it is sent again until it holds); [`RegistryError::Closed`] once closing
    /// has started.
    pub(super) async fn unregister(
        &self,
        id: &InstanceId,
        name: &str,
    ) -> Result<bool, RegistryError> {
        let registered = self.registered.lock().await;
        let naming = self.naming()?;
        let withdrawn = self
            .withdraw(registered, &naming, registration_key(name, id))
            .await;
        match withdrawn {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(failure)) => {
                tracing::warn!(url = %self.lifetime.url, service = name, instance = %id, "Nacos deregistration failed; sent again until the server confirms it");
                Err(failure.into_operation(&self.lifetime.url, "unregister"))
            }
        }
    }

    /// Gives up instance `id` of the service `name` without withdrawing it: another
    /// connection registered the same address (a hot upgrade's new process) and holds it
    /// now. From now on this client neither writes it again nor lets the SDK do so: the
    /// SDK's redo task for it goes with a deregistration through this connection, which
    /// the server applies to this connection's own registration only (see
    /// `withdrawals.rs`), owed until answered. `false` when it was not recorded.
    pub(super) async fn release(&self, id: &InstanceId, name: &str) -> bool {
        let registered = self.registered.lock().await;
        let key = registration_key(name, id);
        let Ok(naming) = self.naming() else {
            // Closing: the close deregisters what is recorded; that includes this one,
            // and the server leaves the new holder's instance alone.
            return registered.contains_key(&key);
        };
        match self.withdraw(registered, &naming, key).await {
            None => false,
            Some(Ok(())) => true,
            Some(Err(failure)) => {
                tracing::warn!(url = %self.lifetime.url, service = name, instance = %id, error = %failure.into_source(), "Nacos: dropping the SDK's redo task of a released instance failed; sent again until the server answers");
                true
            }
        }
    }

    /// Takes the registration `key` out of `registered` and sends its deregistration
    /// through `naming`, owed until answered (recorded first, so that a caller that
    /// stops waiting leaves it owed). `None` when `key` was not registered.
    async fn withdraw(
        &self,
        mut registered: tokio::sync::MutexGuard<'_, Registrations>,
        naming: &NamingService,
        key: String,
    ) -> Option<Result<(), crate::remote::retry::Failure<nacos_sdk::api::error::Error>>> {
        let (name, nacos) = registered.remove(&key)?;
        self.withdrawals
            .owe(key.clone(), (name.clone(), nacos.clone()))
            .await;
        let deregister = naming.deregister_instance(name, Some(self.group.clone()), nacos);
        let result = bounded(self.request_timeout, deregister).await;
        if result.is_ok() {
            self.withdrawals.settle(&key).await;
        }
        drop(registered);
        Some(result)
    }

    /// Sends the deregistrations still owed again, through the current connection (the
    /// probe, once the server answers). Logged when some are confirmed at last.
    pub(super) async fn send_withdrawals(&self) {
        // A registration of the same instance and its withdrawal never cross.
        let _registered = self.registered.lock().await;
        let Ok(naming) = self.naming() else {
            return;
        };
        let (confirmed, owed) = self
            .withdrawals
            .send(&naming, &self.group, self.request_timeout)
            .await;
        if confirmed > 0 {
            tracing::info!(url = %self.lifetime.url, confirmed, owed, "Nacos deregistrations confirmed on a retry");
        }
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
        self.naming.lock().take().map(|(_, naming)| naming)
    }

    /// Deregisters every registration, and sends the deregistrations still owed.
    ///
    /// # Errors
    /// The first deregistration that failed, as a [`RegistryError::Operation`] of
    /// `close`; the others are still tried (and the failed ones stay owed).
    pub(super) async fn deregister_all(&self, naming: &NamingService) -> Result<(), RegistryError> {
        let mut first_error = None;
        let registered = std::mem::take(&mut *self.registered.lock().await);
        for (key, (name, nacos)) in registered {
            let deregister =
                naming.deregister_instance(name.clone(), Some(self.group.clone()), nacos.clone());
            if let Err(failure) = bounded(self.request_timeout, deregister).await {
                self.withdrawals.owe(key, (name, nacos)).await;
                first_error.get_or_insert(failure.into_operation(&self.lifetime.url, "close"));
            }
        }
        let (_, owed) = self
            .withdrawals
            .send(naming, &self.group, self.request_timeout)
            .await;
        if owed > 0 && first_error.is_none() {
            first_error = Some(self.lifetime.failed(
                "close",
                format!("{owed} deregistration(s) not confirmed by the server"),
            ));
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes every registration again (after the connection came back; idempotent).
    pub(super) async fn register_again(&self, naming: &NamingService) {
        let registered = self.registered.lock().await;
        self.write_all(naming, &registered).await;
    }

    /// Writes each of `registrations` through `naming` (a failure is logged: the SDK
    /// retries it).
    pub(super) async fn write_all(&self, naming: &NamingService, registrations: &Registrations) {
        for (name, nacos) in registrations.values() {
            let register =
                naming.register_instance(name.clone(), Some(self.group.clone()), nacos.clone());
            if let Err(failure) = bounded(self.request_timeout, register).await {
                tracing::warn!(url = %self.lifetime.url, service = %name, error = %failure.into_source(), "registering again failed; the SDK retries");
            }
        }
    }
}
