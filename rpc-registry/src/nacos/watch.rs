//! Following one service in Nacos: read it from the server, then read it again each time
//! the SDK's push listener reports a change (several reports during one read cause one
//! more read) and each time the connection came back. Every snapshot is the server's own
//! answer, in the order the reads were made; Nacos has no revision, so revisions come from
//! a counter of this client. A failed read delivers nothing (the consumer keeps its last
//! set) and is retried.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nacos_sdk::api::naming::{NamingChangeEvent, NamingEventListener, NamingService};
use rpc_core::{Instance, RegistryError, ServiceKey, SubscriptionId};
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;

use crate::dubbo::Entry;
use crate::nacos::connection::ConnectionKeeper;
use crate::nacos::error::NacosError;
use crate::nacos::layout::NacosLayout;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure, bounded};
use crate::remote::snapshots::SnapshotPublisher;

/// What the subscriptions of one Nacos client share: how to read a service of its group,
/// one SDK push listener per service name, and the counter their revisions come from.
pub(super) struct GroupWatch {
    /// Its client's URL (for logs and errors).
    lifetime: Arc<ClientLifetime>,
    /// Group of every service of this client.
    group: String,
    /// Bound on each request.
    request_timeout: Duration,
    /// One SDK subscription per service name, shared by this client's subscriptions.
    listeners: Mutex<Listeners>,
    /// The revision of the next snapshot.
    revision: AtomicU64,
    /// How the services are named and their instances read.
    layout: NacosLayout,
}

/// The SDK subscriptions of one client, and the generation of the SDK connection they
/// were made on (`ConnectionKeeper::current`).
#[derive(Default)]
struct Listeners {
    generation: u64,
    by_name: HashMap<String, ServiceListener>,
}

/// The SDK subscription of one service and how many of this client's subscriptions use it.
struct ServiceListener {
    signal: Arc<ChangeSignal>,
    users: usize,
}

/// The SDK push listener: counts change reports, which wake the subscriptions.
struct ChangeSignal {
    changes: watch::Sender<u64>,
}

impl NamingEventListener for ChangeSignal {
    fn event(&self, _event: Arc<NamingChangeEvent>) {
        self.changes
            .send_modify(|count| *count = count.wrapping_add(1));
    }
}

impl GroupWatch {
    /// The watch of `group` in `layout`, each request bounded by `request_timeout`.
    pub(super) fn new(
        lifetime: Arc<ClientLifetime>,
        group: String,
        request_timeout: Duration,
        layout: NacosLayout,
    ) -> Self {
        Self {
            lifetime,
            group,
            request_timeout,
            listeners: Mutex::new(Listeners::default()),
            revision: AtomicU64::new(1),
            layout,
        }
    }

    /// The revision of the next snapshot of any subscription of this client.
    pub(super) fn next_revision(&self) -> u64 {
        self.revision.fetch_add(1, Ordering::Relaxed)
    }

    /// The SDK connection to read through now. After a failover (a new generation), every
    /// SDK subscription of this client is first made again on the new connection (until
    /// every one succeeded; the old connection's are left to it: its server does not
    /// answer, and a push through it only causes one more read).
    ///
    /// # Errors
    /// [`RegistryError::Closed`] once the client is closing.
    async fn naming(&self, connection: &ConnectionKeeper) -> Result<NamingService, RegistryError> {
        let mut listeners = self.listeners.lock().await;
        let (generation, naming) = connection.current()?;
        if listeners.generation != generation {
            let mut all = true;
            for (name, listener) in &listeners.by_name {
                let subscribe = naming.subscribe(
                    name.clone(),
                    Some(self.group.clone()),
                    Vec::new(),
                    listener.signal.clone() as Arc<dyn NamingEventListener>,
                );
                if let Err(failure) = bounded(self.request_timeout, subscribe).await {
                    all = false;
                    tracing::warn!(url = %self.lifetime.url, service = %name, error = %failure.into_source(), "Nacos subscribe on the new connection failed; tried again at the next read");
                }
            }
            if all {
                listeners.generation = generation;
            }
        }
        Ok(naming)
    }

    /// The server's current instances of `service`, named `name` in Nacos (enabled and
    /// healthy ones).
    async fn read(
        &self,
        naming: &NamingService,
        name: &str,
        service: &ServiceKey,
    ) -> Result<Vec<Instance>, Failure<NacosError>> {
        let all =
            naming.get_all_instances(name.to_owned(), Some(self.group.clone()), Vec::new(), false);
        let all = bounded(self.request_timeout, all).await?;
        let mut instances = Vec::with_capacity(all.len());
        for nacos in all
            .into_iter()
            .filter(|nacos| nacos.enabled && nacos.healthy)
        {
            let place = format!("{name}/{}:{}", nacos.ip, nacos.port);
            match self.layout.read(service, nacos) {
                Entry::Provider(instance) => instances.push(instance),
                Entry::Other => {}
                Entry::Unusable(reason) => {
                    self.lifetime
                        .unusable
                        .skip(&self.lifetime.url, &place, &reason);
                }
            }
        }
        Ok(instances)
    }

    /// A change signal for `name`, subscribing in the SDK for its first user.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] of `subscribe` when the SDK subscription fails or the
    /// server does not answer in time.
    async fn listen(
        &self,
        connection: &ConnectionKeeper,
        name: &str,
    ) -> Result<(NamingService, watch::Receiver<u64>), RegistryError> {
        let mut listeners = self.listeners.lock().await;
        // The connection is taken under the lock, so a failover that moved the others
        // meanwhile is not missed (a later failover moves this one with them).
        let naming = connection.naming()?;
        if let Some(listener) = listeners.by_name.get_mut(name) {
            listener.users += 1;
            return Ok((naming, listener.signal.changes.subscribe()));
        }
        let signal = Arc::new(ChangeSignal {
            changes: watch::channel(0).0,
        });
        let changes = signal.changes.subscribe();
        let subscribe = naming.subscribe(
            name.to_owned(),
            Some(self.group.clone()),
            Vec::new(),
            signal.clone() as Arc<dyn NamingEventListener>,
        );
        bounded(self.request_timeout, subscribe)
            .await
            .map_err(|failure| failure.into_operation(&self.lifetime.url, "subscribe"))?;
        listeners
            .by_name
            .insert(name.to_owned(), ServiceListener { signal, users: 1 });
        Ok((naming, changes))
    }

    /// Gives back a change signal; the SDK subscription ends with its last user.
    async fn unlisten(&self, naming: &NamingService, name: &str) {
        let mut listeners = self.listeners.lock().await;
        let Some(listener) = listeners.by_name.get_mut(name) else {
            return;
        };
        listener.users -= 1;
        if listener.users > 0 {
            return;
        }
        let Some(listener) = listeners.by_name.remove(name) else {
            return;
        };
        let unsubscribe = naming.unsubscribe(
            name.to_owned(),
            Some(self.group.clone()),
            Vec::new(),
            listener.signal as Arc<dyn NamingEventListener>,
        );
        if let Err(failure) = bounded(self.request_timeout, unsubscribe).await {
            tracing::warn!(url = %self.lifetime.url, service = %name, error = %failure.into_source(), "Nacos unsubscribe failed");
        }
    }

    /// Gives back every change signal still held (after the subscriptions' loops were
    /// stopped, at close).
    pub(super) async fn unlisten_all(&self, naming: &NamingService) {
        let leftover: Vec<String> = self
            .listeners
            .lock()
            .await
            .by_name
            .keys()
            .cloned()
            .collect();
        for name in leftover {
            self.unlisten(naming, &name).await;
        }
    }
}

/// One subscription's view of Nacos: its service, the change signal it listens to, and
/// what reading it takes.
pub(super) struct ServiceWatch {
    /// Reads, revisions, and the listener to give back when the loop ends.
    group: Arc<GroupWatch>,
    /// Tells when the connection came back, and gives the one to read through.
    connection: Arc<ConnectionKeeper>,
    /// The SDK connection of the last read (its listener is given back there).
    naming: NamingService,
    /// The Nacos service name.
    name: String,
    service: ServiceKey,
    /// The change signal of [`GroupWatch::listen`].
    changes: watch::Receiver<u64>,
}

impl ServiceWatch {
    /// Starts listening to `service`, then reads it: a change after the read is always
    /// reported. Returns the watch and the first read.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] of `subscribe` when listening or reading fails (the
    /// listener is then given back).
    pub(super) async fn open(
        group: Arc<GroupWatch>,
        connection: Arc<ConnectionKeeper>,
        service: ServiceKey,
    ) -> Result<(Self, Vec<Instance>), RegistryError> {
        let name = group.layout.service_name(&service);
        if group.layout.is_dubbo()
            && (rpc_core::triple::is_pattern(&service.version)
                || rpc_core::triple::is_pattern(&service.group))
        {
            tracing::warn!(url = %group.lifetime.url, %service, nacos_service = %name, "Dubbo's layout on Nacos looks up one service: a version or group pattern (`*`, `a,b`) finds no provider");
        }
        let (naming, changes) = group.listen(&connection, &name).await?;
        let first = match group.read(&naming, &name, &service).await {
            Ok(first) => first,
            Err(failure) => {
                group.unlisten(&naming, &name).await;
                return Err(failure.into_operation(&group.lifetime.url, "subscribe"));
            }
        };
        let watch = Self {
            group,
            connection,
            naming,
            name,
            service,
            changes,
        };
        Ok((watch, first))
    }

    /// The subscription's loop: read the service again after every change report and
    /// every reconnection.
    pub(super) async fn run(
        mut self,
        id: SubscriptionId,
        cancel: CancellationToken,
        mut publisher: SnapshotPublisher,
    ) {
        let url = &self.group.lifetime.url;
        let name = &self.name;
        let mut resync = self.connection.resyncs();
        let mut backoff = Backoff::new();
        let mut stale = false;
        loop {
            if !stale {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = publisher.closed() => break,
                    changed = self.changes.changed() => if changed.is_err() { break },
                    changed = resync.changed() => if changed.is_err() { break },
                }
            }
            // Reports that arrive during the read cause one more read.
            self.changes.borrow_and_update();
            resync.borrow_and_update();
            match self.group.naming(&self.connection).await {
                Ok(naming) => self.naming = naming,
                Err(_) => break,
            }
            let read = tokio::select! {
                () = cancel.cancelled() => break,
                read = self.group.read(&self.naming, name, &self.service) => read,
            };
            match read {
                Ok(instances) => {
                    publisher.publish(self.group.next_revision(), instances);
                    stale = false;
                    backoff.reset();
                }
                Err(failure) => {
                    tracing::debug!(%url, service = %name, error = %failure.into_source(), "Nacos read failed; keeping the last known instances");
                    stale = true;
                    if !backoff.wait(&cancel).await {
                        break;
                    }
                }
            }
        }
        // Given back on the current connection (a failover may have moved it since the
        // last read); the last one read through once closing.
        let naming = self.connection.naming().unwrap_or(self.naming);
        self.group.unlisten(&naming, name).await;
        self.group.lifetime.subscriptions.forget(id);
    }
}
