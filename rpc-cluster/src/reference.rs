//! The lifecycle's handle on one reference: subscribe, wait for a provider, close.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use parking_lot::Mutex;
use rpc_core::ManagedReference;
use rpc_core::{Registry, RegistryError, ServiceKey, SubscriptionId};
use tokio::task::JoinHandle;

use crate::ClusterChannel;

/// Longest wait for a subscription's first snapshot during start-up.
const FIRST_SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Connects a [`ClusterChannel`]'s directory to a registry subscription, and lets the
/// lifecycle start and stop it (start-up step 1, shutdown step 6).
pub struct ClusterReference {
    channel: ClusterChannel,
    registry: Arc<dyn Registry>,
    service: ServiceKey,
    subscription: Mutex<Option<(SubscriptionId, JoinHandle<()>)>>,
}

impl ClusterReference {
    /// A reference whose `channel` is fed by `registry`.
    pub fn new(channel: ClusterChannel, registry: Arc<dyn Registry>) -> Self {
        Self {
            service: channel.directory().service().clone(),
            channel,
            registry,
            subscription: Mutex::new(None),
        }
    }

    /// The channel application code calls through.
    pub fn channel(&self) -> &ClusterChannel {
        &self.channel
    }
}

#[async_trait]
impl ManagedReference for ClusterReference {
    fn service(&self) -> &ServiceKey {
        &self.service
    }

    async fn subscribe(&self) -> Result<(), RegistryError> {
        let mut subscription = self.registry.subscribe(&self.service).await?;
        let id = subscription.id();
        let directory = self.channel.directory().clone();
        // Apply the current state before start-up goes on, so the first calls find the
        // providers already registered even with `check: false`. Bounded: a registry
        // that has not answered by then is applied by the feed task when it does.
        if let Ok(Some(first)) =
            tokio::time::timeout(FIRST_SNAPSHOT_WAIT, subscription.next()).await
        {
            directory.apply(first);
        }
        let feed = tokio::spawn(async move {
            while let Some(snapshot) = subscription.next().await {
                directory.apply(snapshot);
            }
        });
        if let Some((_, old)) = self.subscription.lock().replace((id, feed)) {
            old.abort();
        }
        Ok(())
    }

    async fn wait_for_provider(&self) {
        self.channel.directory().wait_for_provider().await;
    }

    async fn close(&self) {
        let subscription = self.subscription.lock().take();
        if let Some((id, feed)) = subscription {
            if let Err(error) = self.registry.unsubscribe(id).await {
                tracing::debug!(service = %self.service, %error, "unsubscribe failed");
            }
            feed.abort();
        }
        self.channel.close();
    }
}
