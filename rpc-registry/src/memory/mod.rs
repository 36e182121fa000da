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
//!
//! Hot upgrade: a hub lives in one process, so a new process has a hub of its own and
//! nothing carries over (use a networked registry across processes). Within one process
//! (tests), a client registering an instance id another client holds takes it over:
//! neither the first client's `unregister` nor its withdrawal on close removes it any
//! more (an instance belongs to the client that registered it last, as with etcd);
//! releasing ([`Registry::release`]) has nothing left to do.
//!
//! `hub.rs` holds the state and its rules (one snapshot per change, to every subscriber,
//! in order); this file holds the clients.

mod hub;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use parking_lot::Mutex;
use rpc_core::{Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId};
use tokio::time::Instant;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::url::RegistryUrl;

pub use hub::MemoryHub;

impl MemoryHub {
    /// A new client of this hub whose subscriptions receive snapshots at once.
    pub fn client(&self) -> MemoryRegistry {
        self.client_with_delay(Duration::ZERO)
    }

    /// A new client whose subscriptions receive every snapshot `delay` after the change.
    pub fn client_with_delay(&self, delay: Duration) -> MemoryRegistry {
        MemoryRegistry {
            client: Arc::new(HubClient {
                hub: self.clone(),
                id: self.new_client_id(),
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
}

/// One client of a [`MemoryHub`]. Cheap to clone; when the last clone is dropped the
/// client's registrations are withdrawn, as a real registry's session would expire.
#[derive(Clone, Debug)]
pub struct MemoryRegistry {
    client: Arc<HubClient>,
}

/// What the clones of one [`MemoryRegistry`] share: its hub, its id there, the delay of
/// its subscriptions, its URL and whether it was closed. Dropping it withdraws the
/// client's registrations and subscriptions.
#[derive(Debug)]
struct HubClient {
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
        self.client.hub.register(self.client.id, instance);
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.check_open()?;
        self.client.hub.unregister(self.client.id, instance);
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.check_open()?;
        let (id, rx) = self
            .client
            .hub
            .subscribe(self.client.id, self.client.delay, service);
        // `then` handles one item at a time, so delayed snapshots keep their order.
        // A snapshot already due is delivered without a timer: a timer rounds up to the
        // next millisecond tick, which added ~1 ms to every change of an undelayed client.
        let stream = UnboundedReceiverStream::new(rx).then(|(due, snapshot)| async move {
            if let Some(due) = due
                && due > Instant::now()
            {
                tokio::time::sleep_until(due).await;
            }
            snapshot
        });
        Ok(Subscription::new(id, stream))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        if self.client.hub.unsubscribe(self.client.id, id) {
            Ok(())
        } else {
            Err(RegistryError::UnknownSubscription(id))
        }
    }

    async fn close(&self) -> Result<(), RegistryError> {
        *self.client.closed.lock() = true;
        self.client.hub.withdraw(self.client.id);
        Ok(())
    }
}

impl Drop for HubClient {
    fn drop(&mut self) {
        self.hub.withdraw(self.id);
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
