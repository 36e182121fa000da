//! The skeleton every network backend's client shares, written once: [`RemoteRegistry`]
//! answers the [`Registry`] calls — refusing them once the client is closed, logging
//! what changed, ending its subscriptions, stopping on drop — and hands what only a
//! backend knows (how to write, withdraw, give up and watch an instance, how to close)
//! to its [`RemoteBackend`]. `EtcdRegistry`, `ZooKeeperRegistry` and `NacosRegistry` are
//! this type over their backend.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use rpc_core::{Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId};

use super::lifetime::ClientLifetime;

/// What one network backend does under the shared skeleton of [`RemoteRegistry`]. The
/// skeleton has checked that the client is open before each call but `release` and
/// `close`.
#[async_trait]
pub trait RemoteBackend: Send + Sync + 'static {
    /// The client's type name, for `Debug` (`EtcdRegistry`).
    const CLIENT: &'static str;
    /// The backend's name in logs (`etcd`, `ZooKeeper`, `Nacos`).
    const NAME: &'static str;

    /// Writes `instance`, kept present (lease, session, heartbeat) until withdrawn.
    async fn register(
        &self,
        lifetime: &ClientLifetime,
        instance: &Instance,
    ) -> Result<(), RegistryError>;

    /// Withdraws `instance`; false when it was not registered by this client.
    async fn unregister(&self, instance: &Instance) -> Result<bool, RegistryError>;

    /// Stops keeping `instance` without withdrawing it (a hot upgrade's new process holds
    /// it now); false when this client did not keep it.
    async fn release(&self, instance: &Instance) -> Result<bool, RegistryError>;

    /// Opens a subscription to `service` on `lifetime` (its first snapshot read).
    async fn subscribe(
        &self,
        lifetime: &Arc<ClientLifetime>,
        service: &ServiceKey,
    ) -> Result<Subscription, RegistryError>;

    /// Withdraws everything this client registered and ends its session, tasks and
    /// subscriptions.
    async fn close(&self, lifetime: &ClientLifetime) -> Result<(), RegistryError>;

    /// Whether the client lost its session, lease or connection and is writing its
    /// registrations again ([`Registry::reregistering`]). Default: never.
    fn reregistering(&self) -> bool {
        false
    }

    /// The client was dropped without [`Registry::close`]. Default: its background tasks
    /// stop, and its instances go as a dead process's would (lease or session expiry).
    fn dropped(&self, lifetime: &Arc<ClientLifetime>) {
        lifetime.closed.cancel();
    }
}

/// A registry client over a network backend (see the module documentation).
pub struct RemoteRegistry<B: RemoteBackend> {
    /// Its URL, subscriptions and background tasks, and whether it was closed.
    lifetime: Arc<ClientLifetime>,
    backend: B,
}

impl<B: RemoteBackend> RemoteRegistry<B> {
    /// The client of `backend`, living as long as `lifetime`.
    pub(crate) fn new(lifetime: Arc<ClientLifetime>, backend: B) -> Self {
        Self { lifetime, backend }
    }

    /// The backend, for what only it offers (a lease id, a path layout).
    pub(crate) fn backend(&self) -> &B {
        &self.backend
    }
}

impl<B: RemoteBackend> fmt::Debug for RemoteRegistry<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(B::CLIENT)
            .field("url", &self.lifetime.url)
            .finish_non_exhaustive()
    }
}

/// Dropped without [`Registry::close`]: what the backend does then
/// (`RemoteBackend::dropped`).
impl<B: RemoteBackend> Drop for RemoteRegistry<B> {
    fn drop(&mut self) {
        self.backend.dropped(&self.lifetime);
    }
}

#[async_trait]
impl<B: RemoteBackend> Registry for RemoteRegistry<B> {
    fn url(&self) -> &str {
        &self.lifetime.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.lifetime.check_open()?;
        self.backend.register(&self.lifetime, instance).await?;
        tracing::debug!(url = %self.lifetime.url, instance = %instance.id, service = %instance.service, "registered in {}", B::NAME);
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.lifetime.check_open()?;
        if self.backend.unregister(instance).await? {
            tracing::debug!(url = %self.lifetime.url, instance = %instance.id, service = %instance.service, "unregistered from {}", B::NAME);
        }
        Ok(())
    }

    async fn release(&self, instance: &Instance) -> Result<(), RegistryError> {
        if self.backend.release(instance).await? {
            tracing::debug!(url = %self.lifetime.url, instance = %instance.id, "released to another {} client", B::NAME);
        }
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.lifetime.check_open()?;
        self.backend.subscribe(&self.lifetime, service).await
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.lifetime.subscriptions.close(id)
    }

    async fn close(&self) -> Result<(), RegistryError> {
        self.backend.close(&self.lifetime).await
    }

    fn skipped_entries(&self) -> u64 {
        self.lifetime.unusable.skipped()
    }

    fn reregistering(&self) -> bool {
        !self.lifetime.is_closed() && self.backend.reregistering()
    }
}
