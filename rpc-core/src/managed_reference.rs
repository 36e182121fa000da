//! What the lifecycle drives of a consumer's reference: the cluster layer implements it,
//! the lifecycle subscribes it at start-up and closes it at shutdown, and neither needs
//! to know the other.

use async_trait::async_trait;

use crate::{RegistryError, ServiceKey};

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
