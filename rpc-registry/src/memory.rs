//! The in-process registry: the embedded default, and the registry of unit tests.
//!
//! A [`MemoryHub`] holds the state; every [`MemoryRegistry`] is one *client* of a hub
//! (as each process has its own etcd or ZooKeeper client), so one process can host many
//! applications that see each other. Registrations are ephemeral like a real registry's:
//! when the last clone of a client is dropped, its instances disappear.
//!
//! `memory://` is the process-wide default hub; `memory://NAME` a named one. The
//! parameter `delay` (e.g. `memory://?delay=300ms`) holds back every change this
//! client's subscriptions receive by that long (the state at subscription time arrives
//! at once), standing in for the propagation delay of a real registry so that
//! shutdown's wait-for-consumers step is exercised honestly.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use parking_lot::Mutex;
use rpc_core::{
    Instance, InstanceId, Registry, RegistryError, ServiceKey, Snapshot, Subscription,
    SubscriptionId,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::url::RegistryUrl;

/// Shared state of an in-process registry. Cheap to clone; clones share the state.
#[derive(Clone, Debug, Default)]
pub struct MemoryHub {
    state: Arc<Mutex<HubState>>,
}

#[derive(Debug, Default)]
struct HubState {
    revision: u64,
    next_client: u64,
    services: HashMap<ServiceKey, ServiceEntry>,
}

#[derive(Debug, Default)]
struct ServiceEntry {
    instances: BTreeMap<InstanceId, (Instance, u64)>,
    subscribers: Vec<Subscriber>,
}

#[derive(Debug)]
struct Subscriber {
    id: SubscriptionId,
    client: u64,
    delay: Duration,
    /// Each snapshot travels with the instant it is due at the subscriber.
    tx: mpsc::UnboundedSender<(Instant, Snapshot)>,
}

impl Subscriber {
    fn send(&self, snapshot: Snapshot) -> bool {
        self.tx
            .send((Instant::now() + self.delay, snapshot))
            .is_ok()
    }
}

static NAMED_HUBS: LazyLock<Mutex<HashMap<String, MemoryHub>>> = LazyLock::new(Default::default);

impl MemoryHub {
    /// A new, empty hub.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide hub called `name` (`""` is the default hub of `memory://`).
    pub fn named(name: &str) -> Self {
        NAMED_HUBS
            .lock()
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// A new client of this hub whose subscriptions receive snapshots at once.
    pub fn client(&self) -> MemoryRegistry {
        self.client_with_delay(Duration::ZERO)
    }

    /// A new client whose subscriptions receive every snapshot `delay` after the change.
    pub fn client_with_delay(&self, delay: Duration) -> MemoryRegistry {
        let id = {
            let mut state = self.state.lock();
            state.next_client += 1;
            state.next_client
        };
        MemoryRegistry {
            client: Arc::new(Client {
                hub: self.clone(),
                id,
                delay,
                url: if delay.is_zero() {
                    "memory://".to_owned()
                } else {
                    format!("memory://?delay={}", humantime::format_duration(delay))
                },
                closed: Mutex::new(false),
            }),
        }
    }

    /// The instances of `service` registered now (for tests and diagnostics).
    pub fn instances(&self, service: &ServiceKey) -> Vec<Instance> {
        let state = self.state.lock();
        state
            .services
            .get(service)
            .map(|entry| entry.instances.values().map(|(i, _)| i.clone()).collect())
            .unwrap_or_default()
    }

    /// Live subscriptions across all clients (for tests: `close` must release them all).
    pub fn subscription_count(&self) -> usize {
        self.state
            .lock()
            .services
            .values()
            .map(|e| e.subscribers.len())
            .sum()
    }

    fn publish(state: &mut HubState, service: &ServiceKey) {
        state.revision += 1;
        let revision = state.revision;
        let Some(entry) = state.services.get_mut(service) else {
            return;
        };
        let snapshot = entry.snapshot(service, revision);
        entry.subscribers.retain(|s| s.send(snapshot.clone()));
    }
}

impl ServiceEntry {
    fn snapshot(&self, service: &ServiceKey, revision: u64) -> Snapshot {
        let instances = self.instances.values().map(|(i, _)| i.clone()).collect();
        Snapshot::new(service.clone(), revision, instances)
    }
}

/// One client of a [`MemoryHub`]. Cheap to clone; when the last clone is dropped the
/// client's registrations are withdrawn, as a real registry's session would expire.
#[derive(Clone, Debug)]
pub struct MemoryRegistry {
    client: Arc<Client>,
}

#[derive(Debug)]
struct Client {
    hub: MemoryHub,
    id: u64,
    delay: Duration,
    url: String,
    closed: Mutex<bool>,
}

impl MemoryRegistry {
    /// A client of the process-wide default hub (what `memory://` gives).
    pub fn new() -> Self {
        MemoryHub::named("").client()
    }

    /// Builds a client from a `memory://[NAME][?delay=DURATION]` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] for an unknown parameter or a bad duration.
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        url.expect_params(&["delay"])?;
        let delay = url.duration_param("delay", Duration::ZERO)?;
        let name = match url.hosts() {
            [] => String::new(),
            [one] if one.port.is_none() => one.host.clone(),
            _ => return Err(url.invalid("memory:// takes at most one hub name and no port".into())),
        };
        Ok(MemoryHub::named(&name).client_with_delay(delay))
    }

    /// The hub this client belongs to.
    pub fn hub(&self) -> &MemoryHub {
        &self.client.hub
    }

    fn check_open(&self) -> Result<(), RegistryError> {
        if *self.client.closed.lock() {
            return Err(RegistryError::Closed {
                url: self.client.url.clone(),
            });
        }
        Ok(())
    }
}

impl Default for MemoryRegistry {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Registry for MemoryRegistry {
    fn url(&self) -> &str {
        &self.client.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.check_open()?;
        let mut state = self.client.hub.state.lock();
        state
            .services
            .entry(instance.service.clone())
            .or_default()
            .instances
            .insert(instance.id.clone(), (instance.clone(), self.client.id));
        MemoryHub::publish(&mut state, &instance.service);
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.check_open()?;
        let mut state = self.client.hub.state.lock();
        let removed = state
            .services
            .get_mut(&instance.service)
            .and_then(|entry| entry.instances.remove(&instance.id))
            .is_some();
        if removed {
            MemoryHub::publish(&mut state, &instance.service);
        }
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.check_open()?;
        let id = SubscriptionId::next();
        let (tx, rx) = mpsc::unbounded_channel();
        let subscriber = Subscriber {
            id,
            client: self.client.id,
            delay: self.client.delay,
            tx,
        };
        let mut state = self.client.hub.state.lock();
        let revision = state.revision;
        let entry = state.services.entry(service.clone()).or_default();
        // The current state first, then every change: no gap, since both happen under
        // the hub's lock.
        // The current state arrives at once, as a real registry answers the initial
        // read; only later changes travel with the propagation delay.
        let _ = subscriber
            .tx
            .send((Instant::now(), entry.snapshot(service, revision)));
        entry.subscribers.push(subscriber);
        // `then` handles one item at a time, so delayed snapshots keep their order.
        // A snapshot already due is delivered without a timer: a timer rounds up to the
        // next millisecond tick, which added ~1 ms to every change of an undelayed client.
        let stream = UnboundedReceiverStream::new(rx).then(|(due, snapshot)| async move {
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            snapshot
        });
        Ok(Subscription::new(id, stream))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        let mut state = self.client.hub.state.lock();
        let mut found = false;
        for entry in state.services.values_mut() {
            entry.subscribers.retain(|s| {
                let matches = s.id == id && s.client == self.client.id;
                found |= matches;
                !matches
            });
        }
        if found {
            Ok(())
        } else {
            Err(RegistryError::UnknownSubscription(id))
        }
    }

    async fn close(&self) -> Result<(), RegistryError> {
        *self.client.closed.lock() = true;
        self.client.withdraw_everything();
        Ok(())
    }
}

impl Client {
    fn withdraw_everything(&self) {
        let mut state = self.hub.state.lock();
        let mut changed = Vec::new();
        for (service, entry) in state.services.iter_mut() {
            entry.subscribers.retain(|s| s.client != self.id);
            let before = entry.instances.len();
            entry.instances.retain(|_, (_, owner)| *owner != self.id);
            if entry.instances.len() != before {
                changed.push(service.clone());
            }
        }
        for service in changed {
            MemoryHub::publish(&mut state, &service);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.withdraw_everything();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ServiceKey {
        ServiceKey::new(name)
    }

    async fn next(sub: &mut Subscription) -> Vec<u16> {
        let snapshot = sub.next().await.expect("stream open");
        let mut ports: Vec<u16> = snapshot.instances.iter().map(|i| i.port).collect();
        ports.sort_unstable();
        ports
    }

    #[tokio::test]
    async fn subscribe_sees_the_current_state_at_once() {
        let hub = MemoryHub::new();
        let provider = hub.client();
        provider
            .register(&Instance::new(key("s"), "h", 1))
            .await
            .unwrap();
        let consumer = hub.client();
        let mut sub = consumer.subscribe(&key("s")).await.unwrap();
        assert_eq!(next(&mut sub).await, [1]);
    }

    #[tokio::test]
    async fn dropping_the_subscribing_client_ends_its_streams() {
        let hub = MemoryHub::new();
        let consumer = hub.client();
        let mut sub = consumer.subscribe(&key("s")).await.unwrap();
        assert_eq!(next(&mut sub).await, Vec::<u16>::new());
        drop(consumer);
        assert!(sub.next().await.is_none());
    }

    #[tokio::test]
    async fn register_and_unregister_arrive_in_order() {
        let hub = MemoryHub::new();
        let consumer = hub.client();
        let provider = hub.client();
        let mut sub = consumer.subscribe(&key("s")).await.unwrap();
        assert_eq!(next(&mut sub).await, Vec::<u16>::new());
        let a = Instance::new(key("s"), "h", 1);
        let b = Instance::new(key("s"), "h", 2);
        provider.register(&a).await.unwrap();
        provider.register(&b).await.unwrap();
        provider.unregister(&a).await.unwrap();
        assert_eq!(next(&mut sub).await, [1]);
        assert_eq!(next(&mut sub).await, [1, 2]);
        assert_eq!(next(&mut sub).await, [2]);
    }

    #[tokio::test]
    async fn two_subscribers_each_see_every_change() {
        let hub = MemoryHub::new();
        let (one, two, provider) = (hub.client(), hub.client(), hub.client());
        let mut first = one.subscribe(&key("s")).await.unwrap();
        let mut second = two.subscribe(&key("s")).await.unwrap();
        provider
            .register(&Instance::new(key("s"), "h", 7))
            .await
            .unwrap();
        for sub in [&mut first, &mut second] {
            assert_eq!(next(sub).await, Vec::<u16>::new());
            assert_eq!(next(sub).await, [7]);
        }
    }

    #[tokio::test]
    async fn unsubscribe_ends_the_stream() {
        let hub = MemoryHub::new();
        let consumer = hub.client();
        let mut sub = consumer.subscribe(&key("s")).await.unwrap();
        assert_eq!(next(&mut sub).await, Vec::<u16>::new());
        consumer.unsubscribe(sub.id()).await.unwrap();
        assert!(sub.next().await.is_none());
        assert!(matches!(
            consumer.unsubscribe(sub.id()).await,
            Err(RegistryError::UnknownSubscription(_))
        ));
    }

    #[tokio::test]
    async fn services_do_not_cross_talk() {
        let hub = MemoryHub::new();
        let consumer = hub.client();
        let mut a = consumer.subscribe(&key("a")).await.unwrap();
        let provider = hub.client();
        provider
            .register(&Instance::new(key("b"), "h", 2))
            .await
            .unwrap();
        provider
            .register(&Instance::new(key("a"), "h", 1))
            .await
            .unwrap();
        assert_eq!(next(&mut a).await, Vec::<u16>::new());
        assert_eq!(next(&mut a).await, [1]);
    }

    #[tokio::test]
    async fn dropping_a_client_withdraws_its_instances() {
        let hub = MemoryHub::new();
        let provider = hub.client();
        provider
            .register(&Instance::new(key("s"), "h", 1))
            .await
            .unwrap();
        let consumer = hub.client();
        let mut sub = consumer.subscribe(&key("s")).await.unwrap();
        assert_eq!(next(&mut sub).await, [1]);
        drop(provider);
        assert_eq!(next(&mut sub).await, Vec::<u16>::new());
    }

    #[tokio::test]
    async fn close_releases_subscriptions_and_registrations() {
        let hub = MemoryHub::new();
        let client = hub.client();
        client
            .register(&Instance::new(key("s"), "h", 1))
            .await
            .unwrap();
        let _sub = client.subscribe(&key("t")).await.unwrap();
        assert_eq!(hub.subscription_count(), 1);
        client.close().await.unwrap();
        assert_eq!(hub.subscription_count(), 0);
        assert!(hub.instances(&key("s")).is_empty());
        assert!(matches!(
            client.register(&Instance::new(key("s"), "h", 1)).await,
            Err(RegistryError::Closed { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_client_receives_changes_late_and_in_order() {
        let hub = MemoryHub::new();
        let consumer = hub.client_with_delay(Duration::from_millis(300));
        let mut sub = consumer.subscribe(&key("s")).await.unwrap();
        let start = Instant::now();
        assert_eq!(next(&mut sub).await, Vec::<u16>::new());
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the current state is not delayed"
        );
        let provider = hub.client();
        provider
            .register(&Instance::new(key("s"), "h", 1))
            .await
            .unwrap();
        provider
            .register(&Instance::new(key("s"), "h", 2))
            .await
            .unwrap();
        let registered = Instant::now();
        assert_eq!(next(&mut sub).await, [1]);
        assert_eq!(registered.elapsed(), Duration::from_millis(300));
        assert_eq!(next(&mut sub).await, [1, 2]);
    }

    #[test]
    fn url_parameters_are_checked() {
        let bad = RegistryUrl::parse("memory://?dely=1s").unwrap();
        assert!(
            MemoryRegistry::from_url(&bad)
                .unwrap_err()
                .to_string()
                .contains("`dely`")
        );
        let bad = RegistryUrl::parse("memory://?delay=soon").unwrap();
        assert!(
            MemoryRegistry::from_url(&bad)
                .unwrap_err()
                .to_string()
                .contains("`delay`")
        );
    }
}
