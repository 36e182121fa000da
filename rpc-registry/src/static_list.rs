//! A fixed list of provider addresses: `static://127.0.0.1:20880,127.0.0.1:20881`.
//!
//! For direct connections without a registry (tests, development, a service mesh that
//! already does discovery). Every subscription, whatever the service, yields the list
//! once and then nothing more; registering is accepted and does nothing, since there is
//! nobody to announce to. A hot upgrade keeps the address, so the list stays right
//! throughout; there is nothing to release.

use std::collections::HashMap;

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream;
use parking_lot::Mutex;
use rpc_core::{
    Instance, InstanceId, Registry, RegistryError, ServiceKey, Snapshot, Subscription,
    SubscriptionId,
};
use tokio_util::sync::CancellationToken;

use crate::url::RegistryUrl;

/// A registry that always answers with the same addresses.
#[derive(Debug)]
pub struct StaticRegistry {
    url: String,
    addresses: Vec<(String, u16)>,
    subscriptions: Mutex<HashMap<SubscriptionId, CancellationToken>>,
}

impl StaticRegistry {
    /// A registry that lists `addresses` (`(host, port)`) for every service.
    pub fn new(addresses: Vec<(String, u16)>) -> Self {
        let list: Vec<String> = addresses
            .iter()
            .map(|(host, port)| rpc_core::format_authority(host, *port))
            .collect();
        Self {
            url: format!("static://{}", list.join(",")),
            addresses,
            subscriptions: Mutex::new(HashMap::new()),
        }
    }

    /// Builds the registry from `static://host:port[,host:port...]`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] when there is no address, an address has no port,
    /// or the URL has parameters.
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        url.expect_params(&[])?;
        if url.hosts().is_empty() {
            return Err(url.invalid("static:// needs at least one host:port".into()));
        }
        let addresses = url
            .hosts()
            .iter()
            .map(|h| match h.port {
                Some(port) => Ok((h.host.clone(), port)),
                None => Err(url.invalid(format!("static:// address `{}` has no port", h.host))),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self::new(addresses))
    }

    fn instances(&self, service: &ServiceKey) -> Vec<Instance> {
        self.addresses
            .iter()
            .map(|(host, port)| {
                let mut instance = Instance::new(service.clone(), host.clone(), *port);
                instance.id = InstanceId::new(format!(
                    "static:{}",
                    rpc_core::format_authority(host, *port)
                ));
                instance.start_time_ms = 0;
                instance
            })
            .collect()
    }
}

#[async_trait]
impl Registry for StaticRegistry {
    fn url(&self) -> &str {
        &self.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        tracing::debug!(instance = %instance.id, "static registry: nothing to register with");
        Ok(())
    }

    async fn unregister(&self, _instance: &Instance) -> Result<(), RegistryError> {
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        let id = SubscriptionId::next();
        let cancelled = CancellationToken::new();
        self.subscriptions.lock().insert(id, cancelled.clone());
        let snapshot = Snapshot::new(service.clone(), 1, self.instances(service));
        // The list once, then stay open (yielding nothing) until unsubscribed.
        let end = stream::once(async move { cancelled.cancelled_owned().await })
            .filter_map(|()| async { None });
        Ok(Subscription::new(
            id,
            stream::once(async { snapshot }).chain(end),
        ))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        match self.subscriptions.lock().remove(&id) {
            Some(token) => {
                token.cancel();
                Ok(())
            }
            None => Err(RegistryError::UnknownSubscription(id)),
        }
    }

    async fn close(&self) -> Result<(), RegistryError> {
        for (_, token) in self.subscriptions.lock().drain() {
            token.cancel();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_every_address_then_ends_on_unsubscribe() {
        let url = RegistryUrl::parse("static://127.0.0.1:20880,127.0.0.1:20881").unwrap();
        let registry = StaticRegistry::from_url(&url).unwrap();
        let mut sub = registry.subscribe(&ServiceKey::new("a.B")).await.unwrap();
        let snapshot = sub.next().await.unwrap();
        let ports: Vec<u16> = snapshot.instances.iter().map(|i| i.port).collect();
        assert_eq!(ports, [20880, 20881]);
        assert_eq!(snapshot.instances[0].id.as_str(), "static:127.0.0.1:20880");
        registry.unsubscribe(sub.id()).await.unwrap();
        assert!(sub.next().await.is_none());
    }

    #[test]
    fn an_address_without_port_is_an_error() {
        let url = RegistryUrl::parse("static://127.0.0.1").unwrap();
        let error = StaticRegistry::from_url(&url).unwrap_err().to_string();
        assert!(error.contains("has no port"), "{error}");
        let url = RegistryUrl::parse("static://").unwrap();
        assert!(StaticRegistry::from_url(&url).is_err());
    }
}
