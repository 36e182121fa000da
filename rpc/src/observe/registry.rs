//! Counting the operations this application asks of its registries, by result.
//!
//! A [`MeteredRegistry`] wraps a registry client and counts each call of the `Registry`
//! trait as it returns. What a backend does by itself — renewing a lease, registering
//! again after a lost session — is the backend's own business and not counted here.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use rpc_core::{Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId};

use super::scrape::counters;

/// The operations of the `Registry` trait, in the order of [`Operation::index`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Register,
    Unregister,
    Subscribe,
    Unsubscribe,
    Close,
    Release,
}

impl Operation {
    const ALL: [Operation; 6] = [
        Self::Register,
        Self::Unregister,
        Self::Subscribe,
        Self::Unsubscribe,
        Self::Close,
        Self::Release,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Register => "register",
            Self::Unregister => "unregister",
            Self::Subscribe => "subscribe",
            Self::Unsubscribe => "unsubscribe",
            Self::Close => "close",
            Self::Release => "release",
        }
    }
}

/// Operations of one registry: `[operation][0 = ok, 1 = error]`.
#[derive(Debug, Default)]
struct OperationCounts([[AtomicU64; 2]; Operation::ALL.len()]);

impl OperationCounts {
    fn note<T>(&self, operation: Operation, result: &Result<T, RegistryError>) {
        self.0[operation as usize][usize::from(result.is_err())].fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self, operation: Operation, failed: bool) -> u64 {
        self.0[operation as usize][usize::from(failed)].load(Ordering::Relaxed)
    }
}

/// A registry client whose operations are counted under the registry's name.
pub(super) struct MeteredRegistry {
    inner: Arc<dyn Registry>,
    counts: Arc<OperationCounts>,
}

#[async_trait]
impl Registry for MeteredRegistry {
    fn url(&self) -> &str {
        self.inner.url()
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        let result = self.inner.register(instance).await;
        self.counts.note(Operation::Register, &result);
        result
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        let result = self.inner.unregister(instance).await;
        self.counts.note(Operation::Unregister, &result);
        result
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        let result = self.inner.subscribe(service).await;
        self.counts.note(Operation::Subscribe, &result);
        result
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        let result = self.inner.unsubscribe(id).await;
        self.counts.note(Operation::Unsubscribe, &result);
        result
    }

    async fn close(&self) -> Result<(), RegistryError> {
        let result = self.inner.close().await;
        self.counts.note(Operation::Close, &result);
        result
    }

    fn skipped_entries(&self) -> u64 {
        self.inner.skipped_entries()
    }

    fn reregistering(&self) -> bool {
        self.inner.reregistering()
    }

    async fn release(&self, instance: &Instance) -> Result<(), RegistryError> {
        let result = self.inner.release(instance).await;
        self.counts.note(Operation::Release, &result);
        result
    }
}

/// Writes `rpc_registry_operations_total{registry,operation,result}` on each scrape:
/// the operations asked of each registry (`register`, `unregister`, `subscribe`,
/// `unsubscribe`, `close`, `release`) by `result` (`ok`, `error`), `registry` being its name under
/// `registries`.
#[derive(Debug, Default)]
pub(super) struct RegistryOperations {
    by_registry: Mutex<Vec<MeteredEntry>>,
}

/// One registry's name, operation counts, and client (asked for the entries it skipped
/// at each scrape; not kept alive by the metrics).
type MeteredEntry = (String, Arc<OperationCounts>, Weak<dyn Registry>);

impl RegistryOperations {
    /// `registry`, with its operations counted under `name`.
    pub(super) fn meter(&self, name: &str, registry: Arc<dyn Registry>) -> Arc<dyn Registry> {
        let counts = Arc::new(OperationCounts::default());
        self.by_registry
            .lock()
            .push((name.to_owned(), counts.clone(), Arc::downgrade(&registry)));
        Arc::new(MeteredRegistry {
            inner: registry,
            counts,
        })
    }
}

impl Collector for RegistryOperations {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let by_registry = self.by_registry.lock();
        let samples = by_registry.iter().flat_map(|(name, counts, _)| {
            Operation::ALL.iter().flat_map(move |&operation| {
                [("ok", false), ("error", true)].map(|(result, failed)| {
                    (
                        [
                            ("registry", name.as_str()),
                            ("operation", operation.name()),
                            ("result", result),
                        ],
                        counts.get(operation, failed),
                    )
                })
            })
        });
        counters(
            &mut encoder,
            "rpc_registry_operations",
            "Operations asked of each registry, by result.",
            samples,
        )?;
        let skipped = by_registry.iter().filter_map(|(name, _, registry)| {
            let registry = registry.upgrade()?;
            Some(([("registry", name.as_str())], registry.skipped_entries()))
        });
        counters(
            &mut encoder,
            "rpc_registry_entries_skipped",
            "Entries of each registry that subscriptions found and could not use (a foreign peer's: a URL that does not parse, a protocol not spoken here, no port), each counted once.",
            skipped,
        )
    }
}

impl fmt::Debug for MeteredRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredRegistry")
            .field("url", &self.inner.url())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use rpc_registry::MemoryHub;

    use super::*;
    use crate::observe::scrape::encode_one;

    #[tokio::test]
    async fn operations_are_counted_by_registry_and_result() {
        let operations = Arc::new(RegistryOperations::default());
        let hub = MemoryHub::new();
        let registry = operations.meter("main", Arc::new(hub.client()));
        let instance = Instance::new(ServiceKey::new("t.S"), "127.0.0.1", 1);
        registry.register(&instance).await.unwrap();
        registry.unregister(&instance).await.unwrap();
        registry.close().await.unwrap();
        assert!(registry.register(&instance).await.is_err(), "closed");

        let text = encode_one(operations);
        let line = |operation: &str, result: &str, n: u64| {
            format!(
                "rpc_registry_operations_total{{registry=\"main\",operation=\"{operation}\",result=\"{result}\"}} {n}\n"
            )
        };
        for expected in [
            line("register", "ok", 1),
            line("register", "error", 1),
            line("unregister", "ok", 1),
            line("close", "ok", 1),
            line("subscribe", "ok", 0),
        ] {
            assert!(text.contains(&expected), "{expected} in {text}");
        }
    }
}
