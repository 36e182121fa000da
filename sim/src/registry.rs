//! The simulated registry: one in-process hub (the `memory` backend's rules: an entry
//! belongs to the client that wrote it last, snapshots in revision order) with the
//! behaviours of a real one that matter to online/offline added per host:
//!
//! - **partitions between a host and the registry**: while a host cannot reach it, its
//!   writes fail with `Unreachable` and its watches deliver nothing (what an etcd watch
//!   or a ZooKeeper session does across a partition); the snapshots held back arrive,
//!   in order, once it can again;
//! - **watch delay and reorder**: each host sees every change some milliseconds late
//!   (drawn per host from the schedule's seed), so consumers learn of a change at
//!   different times, and each change 0–49 ms later again (fixed by its revision), so a
//!   later change may arrive before an earlier one;
//! - **lease expiry**: a host's registrations outlive its process until the lease's TTL
//!   passes (the driver calls [`SimRegistry::expire`]), as a crashed provider's
//!   ephemeral entries do;
//! - **leader loss**: while the registry has no leader ([`SimRegistry::set_leader`]),
//!   every host is as if partitioned from it; leases live on (etcd extends them across
//!   an election).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use parking_lot::Mutex;
use rpc::core::{
    Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId, Unreachability,
};
use rpc::registry::{MemoryHub, MemoryRegistry};
use tokio::sync::watch;

use crate::ledger::{Arrival, now};

/// The registry every simulated host shares.
#[derive(Clone)]
pub struct SimRegistry {
    hub: MemoryHub,
    /// Whether the registry has a leader (answers anyone).
    leader: watch::Sender<bool>,
    hosts: Arc<Mutex<HashMap<String, HostLink>>>,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

/// What the registry keeps of one host: whether it can reach the registry, and the
/// clients (leases) of its current process and of killed ones whose TTL runs.
struct HostLink {
    reachable: watch::Sender<bool>,
    leases: Vec<Lease>,
}

/// A process's registry client, held for as long as its lease lives.
struct Lease {
    client: MemoryRegistry,
    /// Its process was killed: the lease lives until [`SimRegistry::expire`].
    orphaned: bool,
}

impl Default for HostLink {
    fn default() -> Self {
        Self {
            reachable: watch::Sender::new(true),
            leases: Vec::new(),
        }
    }
}

impl Default for SimRegistry {
    fn default() -> Self {
        Self {
            hub: MemoryHub::default(),
            leader: watch::Sender::new(true),
            hosts: Arc::default(),
            arrivals: Arc::default(),
        }
    }
}

impl SimRegistry {
    /// A new, empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the registry has a leader from now on.
    pub fn set_leader(&self, elected: bool) {
        self.leader.send_replace(elected);
    }

    /// The registry client of a process on `host`, whose watches see each change
    /// `watch_delay` late. The leases of the host's earlier processes that ended
    /// gracefully end now; those of killed ones live until they expire, and the new
    /// process takes their entries over by registering them again.
    pub fn client(&self, host: &str, watch_delay: Duration) -> Arc<dyn Registry> {
        let inner = self.hub.client();
        let mut hosts = self.hosts.lock();
        let link = hosts.entry(host.to_owned()).or_default();
        link.leases.retain(|lease| lease.orphaned);
        link.leases.push(Lease {
            client: inner.clone(),
            orphaned: false,
        });
        Arc::new(SimClient {
            inner,
            host: host.to_owned(),
            reachable: link.reachable.subscribe(),
            leader: self.leader.subscribe(),
            watch_delay,
            arrivals: self.arrivals.clone(),
        })
    }

    /// Every registration each host's watches delivered, each time one arrived that
    /// the previous snapshot did not list.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().clone()
    }

    /// Whether `host` can reach the registry from now on.
    pub fn set_reachable(&self, host: &str, reachable: bool) {
        let mut hosts = self.hosts.lock();
        let link = hosts.entry(host.to_owned()).or_default();
        link.reachable.send_replace(reachable);
    }

    /// `host`'s process was killed: its lease lives on until [`SimRegistry::expire`].
    pub fn killed(&self, host: &str) {
        if let Some(lease) = self
            .hosts
            .lock()
            .get_mut(host)
            .and_then(|link| link.leases.iter_mut().rev().find(|lease| !lease.orphaned))
        {
            lease.orphaned = true;
        }
    }

    /// The lease of `host`'s earliest killed process expires: the entries it still owns
    /// are withdrawn (those a later process registered again are not its own). Closed,
    /// not only dropped: a killed process's tasks may still hold its client.
    pub fn expire(&self, host: &str) {
        let expired = self.hosts.lock().get_mut(host).and_then(|link| {
            let at = link.leases.iter().position(|lease| lease.orphaned)?;
            Some(link.leases.remove(at).client)
        });
        if let Some(client) = expired {
            // The memory backend's close completes without waiting.
            let closed = client.close().now_or_never();
            debug_assert!(closed.is_some(), "a memory registry closes at once");
        }
    }

    /// The instances of `service` registered now.
    pub fn instances(&self, service: &ServiceKey) -> Vec<Instance> {
        self.hub.instances(service)
    }
}

/// One process's client: the hub's, behind the host's link to the registry.
struct SimClient {
    inner: MemoryRegistry,
    host: String,
    reachable: watch::Receiver<bool>,
    leader: watch::Receiver<bool>,
    watch_delay: Duration,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl SimClient {
    fn check_reachable(&self) -> Result<(), RegistryError> {
        if *self.reachable.borrow() && *self.leader.borrow() {
            return Ok(());
        }
        Err(RegistryError::Unreachable {
            url: "sim://registry".into(),
            timeout: Duration::from_secs(3),
            cause: Unreachability::TimedOut,
            source: "partitioned from the registry".into(),
        })
    }
}

#[async_trait::async_trait]
impl Registry for SimClient {
    fn url(&self) -> &str {
        "sim://registry"
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.check_reachable()?;
        self.inner.register(instance).await
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.check_reachable()?;
        self.inner.unregister(instance).await
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.check_reachable()?;
        let subscription = self.inner.subscribe(service).await?;
        let id = subscription.id();
        let (reachable, leader) = (self.reachable.clone(), self.leader.clone());
        let delay = self.watch_delay;
        let (host, arrivals) = (self.host.clone(), self.arrivals.clone());
        // The newest revision delivered, and the registrations it listed.
        let listed = Arc::new(Mutex::new((0, HashMap::new())));
        // Up to REORDERED snapshots are under way at once, each delayed by the host's
        // watch delay and a jitter of its own: a later one may overtake an earlier one,
        // as pushes of a registry cluster's members may (the consumer applies only a
        // revision newer than the last it applied).
        let stream = subscription.map(move |snapshot| {
            let (reachable, leader) = (reachable.clone(), leader.clone());
            let (host, arrivals, listed) = (host.clone(), arrivals.clone(), listed.clone());
            async move {
                answering(reachable, leader).await;
                tokio::time::sleep(delay + jitter(&host, snapshot.revision)).await;
                let at = now();
                let now_listed: HashMap<_, _> = snapshot
                    .instances
                    .iter()
                    .map(|i| (i.id.clone(), i.metadata.clone()))
                    .collect();
                let mut listed = listed.lock();
                let (newest, listed) = &mut *listed;
                // A snapshot older than one delivered changes nothing for the consumer.
                if snapshot.revision <= *newest {
                    return snapshot;
                }
                *newest = snapshot.revision;
                // New, or changed: a changed registration (an online's revision) lifts
                // a consumer's closing mark, which brings the instance back as if new.
                for instance in snapshot.instances.iter() {
                    if listed.get(&instance.id) != Some(&instance.metadata) {
                        arrivals.lock().push(Arrival {
                            host: host.clone(),
                            authority: instance.authority(),
                            at,
                        });
                    }
                }
                *listed = now_listed;
                snapshot
            }
        });
        let stream = stream.buffer_unordered(REORDERED);
        Ok(Subscription::new(id, stream))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.inner.unsubscribe(id).await
    }

    async fn close(&self) -> Result<(), RegistryError> {
        self.check_reachable()?;
        self.inner.close().await
    }
}

/// How many of a watch's snapshots may be under way at once (so overtake each other).
const REORDERED: usize = 4;

/// The extra delay of snapshot `revision` on `host`'s watch: 0–49 ms, fixed by both
/// (the same seed replays the same order).
fn jitter(host: &str, revision: u64) -> Duration {
    let mut hash = revision.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for byte in host.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    Duration::from_millis(hash % 50)
}

/// Resolves once the host can reach the registry and it has a leader, both at once.
async fn answering(mut reachable: watch::Receiver<bool>, mut leader: watch::Receiver<bool>) {
    loop {
        let _ = reachable.wait_for(|reachable| *reachable).await;
        let _ = leader.wait_for(|elected| *elected).await;
        if *reachable.borrow() {
            return;
        }
    }
}
