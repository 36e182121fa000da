//! A memory registry client with switches a test flips to make it misbehave the way a
//! remote registry does: withdrawals refused (no leader), or its registrations being
//! written again (a lost session).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use rpc::registry::MemoryRegistry;
use rpc_core::{Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId};

/// The switches of a [`SwitchedRegistry`], shared with the test.
#[derive(Clone, Default)]
pub struct Switches {
    /// While set, every withdrawal fails ([`RegistryError::Closed`]).
    pub unwritable: Arc<AtomicBool>,
    /// While set, the client says it is writing its registrations again.
    pub reregistering: Arc<AtomicBool>,
}

/// A memory client that does what its [`Switches`] say, and otherwise what `inner` does.
pub struct SwitchedRegistry {
    pub inner: MemoryRegistry,
    pub switches: Switches,
}

#[async_trait]
impl Registry for SwitchedRegistry {
    fn url(&self) -> &str {
        self.inner.url()
    }
    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.inner.register(instance).await
    }
    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        if self.switches.unwritable.load(Ordering::SeqCst) {
            return Err(RegistryError::Closed {
                url: self.url().into(),
            });
        }
        self.inner.unregister(instance).await
    }
    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.inner.subscribe(service).await
    }
    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.inner.unsubscribe(id).await
    }
    async fn close(&self) -> Result<(), RegistryError> {
        self.inner.close().await
    }
    fn reregistering(&self) -> bool {
        self.switches.reregistering.load(Ordering::SeqCst)
    }
}
