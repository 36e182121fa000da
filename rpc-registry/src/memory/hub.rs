//! The state of an in-process registry and the rules it applies: which client registered
//! which instance, who subscribes to what, and one snapshot per change, sent to every
//! subscriber under the hub's lock so that each sees every change, in order.
//!
//! Clients of a hub (`MemoryRegistry`, made by [`MemoryHub::client`]) are in `mod.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use parking_lot::Mutex;
use rpc_core::{Instance, InstanceId, ServiceKey, Snapshot, SubscriptionId};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Shared state of an in-process registry. Cheap to clone; clones share the state.
#[derive(Clone, Debug, Default)]
pub struct MemoryHub {
    state: Arc<Mutex<HubState>>,
}

/// Everything a hub knows.
#[derive(Debug, Default)]
struct HubState {
    /// Revision of the last change, of any service.
    revision: u64,
    /// Id of the last client made.
    next_client: u64,
    services: HashMap<ServiceKey, ServiceEntry>,
}

/// One service's instances and subscribers.
#[derive(Debug, Default)]
struct ServiceEntry {
    /// Each instance with the id of the client that registered it.
    instances: BTreeMap<InstanceId, (Instance, u64)>,
    subscribers: Vec<Subscriber>,
}

/// One subscription: where its snapshots go, and when each is due.
#[derive(Debug)]
struct Subscriber {
    id: SubscriptionId,
    client: u64,
    delay: Duration,
    /// Each snapshot travels with the instant it is due at the subscriber, if it is
    /// delayed (see `SnapshotReceiver`).
    tx: mpsc::UnboundedSender<(Option<Instant>, Snapshot)>,
}

impl Subscriber {
    fn send(&self, snapshot: Snapshot) -> bool {
        self.tx.send((due_after(self.delay), snapshot)).is_ok()
    }
}

/// What a subscription receives: each snapshot with the instant it is due, `None` for
/// at once. An undelayed snapshot carries no instant: the writer and the subscriber may
/// run on different runtimes (hosts of the fleet simulator), whose paused clocks
/// began at different moments, so an instant read on one is not comparable on the
/// other.
pub(super) type SnapshotReceiver = mpsc::UnboundedReceiver<(Option<Instant>, Snapshot)>;

/// The instant a snapshot sent now with `delay` is due, `None` without a delay.
fn due_after(delay: Duration) -> Option<Instant> {
    (!delay.is_zero()).then(|| Instant::now() + delay)
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

    /// The id of a new client.
    pub(super) fn new_client_id(&self) -> u64 {
        let mut state = self.state.lock();
        state.next_client += 1;
        state.next_client
    }

    /// Adds (or replaces) `instance`, owned by `client`, and tells the subscribers.
    pub(super) fn register(&self, client: u64, instance: &Instance) {
        let mut state = self.state.lock();
        state
            .services
            .entry(instance.service.clone())
            .or_default()
            .instances
            .insert(instance.id.clone(), (instance.clone(), client));
        publish(&mut state, &instance.service);
    }

    /// Removes `instance` and tells the subscribers, if `client` holds it: an instance
    /// another client registered since (took over) is left to it.
    pub(super) fn unregister(&self, client: u64, instance: &Instance) {
        let mut state = self.state.lock();
        let Some(entry) = state.services.get_mut(&instance.service) else {
            return;
        };
        let held = entry
            .instances
            .get(&instance.id)
            .is_some_and(|(_, owner)| *owner == client);
        if held {
            entry.instances.remove(&instance.id);
            publish(&mut state, &instance.service);
        }
    }

    /// A new subscription of `client` to `service`: its id and the receiver of its
    /// snapshots, the current state first (due at once, as a real registry answers the
    /// initial read), then every change (due `delay` after it).
    pub(super) fn subscribe(
        &self,
        client: u64,
        delay: Duration,
        service: &ServiceKey,
    ) -> (SubscriptionId, SnapshotReceiver) {
        let id = SubscriptionId::next();
        let (tx, rx) = mpsc::unbounded_channel();
        let subscriber = Subscriber {
            id,
            client,
            delay,
            tx,
        };
        let mut state = self.state.lock();
        let revision = state.revision;
        let entry = state.services.entry(service.clone()).or_default();
        // The current state first, then every change: no gap, since both happen under
        // the hub's lock.
        let _ = subscriber
            .tx
            .send((None, entry.snapshot(service, revision)));
        entry.subscribers.push(subscriber);
        (id, rx)
    }

    /// Ends subscription `id` of `client`; `false` when it is not live.
    pub(super) fn unsubscribe(&self, client: u64, id: SubscriptionId) -> bool {
        let mut state = self.state.lock();
        let mut found = false;
        for entry in state.services.values_mut() {
            entry.subscribers.retain(|s| {
                let matches = s.id == id && s.client == client;
                found |= matches;
                !matches
            });
        }
        found
    }

    /// Ends every subscription of `client` and withdraws every instance it registered,
    /// telling the subscribers of each service that changed.
    pub(super) fn withdraw(&self, client: u64) {
        let mut state = self.state.lock();
        let mut changed = Vec::new();
        for (service, entry) in state.services.iter_mut() {
            entry.subscribers.retain(|s| s.client != client);
            let before = entry.instances.len();
            entry.instances.retain(|_, (_, owner)| *owner != client);
            if entry.instances.len() != before {
                changed.push(service.clone());
            }
        }
        for service in changed {
            publish(&mut state, &service);
        }
    }
}

/// Counts a change of `service` and sends its new snapshot to every subscriber, dropping
/// those whose stream is gone.
fn publish(state: &mut HubState, service: &ServiceKey) {
    state.revision += 1;
    let revision = state.revision;
    let Some(entry) = state.services.get_mut(service) else {
        return;
    };
    let snapshot = entry.snapshot(service, revision);
    entry.subscribers.retain(|s| s.send(snapshot.clone()));
}

impl ServiceEntry {
    fn snapshot(&self, service: &ServiceKey, revision: u64) -> Snapshot {
        let instances = self.instances.values().map(|(i, _)| i.clone()).collect();
        Snapshot::new(service.clone(), revision, instances)
    }
}
