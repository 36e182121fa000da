//! Delivering subscriptions for the network backends: the bookkeeping of one client's
//! subscriptions and the rules every snapshot stream follows.
//!
//! A backend's watch loop publishes the full set it read from the server each time it
//! changes; [`SnapshotPublisher`] turns that into the stream
//! [`lossless_rpc_core::Subscription`](rpc_core::Subscription) promises:
//! - the first set is always delivered (an empty one too: "no instances" is an answer);
//! - a set equal to the last one delivered is dropped, so a resync after a reconnect that
//!   finds nothing new delivers nothing;
//! - revisions strictly increase: the server's revision is used when it is greater than the
//!   last one delivered, else the last one plus one (a server whose revision went back,
//!   e.g. a wiped test cluster, must not make consumers ignore its news);
//! - the stream holds only the newest snapshot: a consumer that polls slowly skips
//!   intermediate sets instead of buffering them, which full snapshots make harmless.
//!
//! Backends never publish anything because of a fault: while the server is unreachable the
//! consumer keeps the last set it was given (empty protection at the source).

use std::collections::HashMap;

use futures_util::{Stream, StreamExt};
use parking_lot::Mutex;
use rpc_core::{Instance, RegistryError, ServiceKey, Snapshot, SubscriptionId};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_util::sync::CancellationToken;

/// The live subscriptions of one registry client, each cancellable alone or all at once.
#[derive(Debug)]
pub(crate) struct SubscriptionSet {
    /// Cancelled by `close` (and when the client is dropped); parent of every subscription.
    root: CancellationToken,
    live: Mutex<HashMap<SubscriptionId, CancellationToken>>,
}

impl SubscriptionSet {
    pub(crate) fn new(root: CancellationToken) -> Self {
        Self {
            root,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// A new subscription id and the token its watch loop stops on.
    pub(crate) fn open(&self) -> (SubscriptionId, CancellationToken) {
        let id = SubscriptionId::next();
        let token = self.root.child_token();
        self.live.lock().insert(id, token.clone());
        (id, token)
    }

    /// Ends subscription `id`.
    ///
    /// # Errors
    /// [`RegistryError::UnknownSubscription`] when `id` is not live (already ended).
    pub(crate) fn close(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        match self.live.lock().remove(&id) {
            Some(token) => {
                token.cancel();
                Ok(())
            }
            None => Err(RegistryError::UnknownSubscription(id)),
        }
    }

    /// Forgets `id` after its loop ended by itself (its stream was dropped).
    pub(crate) fn forget(&self, id: SubscriptionId) {
        self.live.lock().remove(&id);
    }

    /// Ends every subscription.
    pub(crate) fn close_all(&self) {
        for (_, token) in self.live.lock().drain() {
            token.cancel();
        }
    }

    /// How many subscriptions are live.
    #[cfg_attr(not(feature = "nacos"), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        self.live.lock().len()
    }
}

/// A server's signed revision counter (etcd revision, ZooKeeper zxid) as a snapshot
/// revision; a negative value, which servers never send, counts as 0.
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
pub(crate) fn to_revision(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

/// The sending side of one subscription: publishes full sets, applying the rules above.
#[derive(Debug)]
pub(crate) struct SnapshotPublisher {
    service: ServiceKey,
    /// Holds the last snapshot delivered (instances sorted by id): the comparison
    /// with the next set reads it there.
    tx: watch::Sender<Option<Snapshot>>,
}

impl SnapshotPublisher {
    /// A publisher for `service` and the stream its consumer reads.
    pub(crate) fn new(
        service: ServiceKey,
    ) -> (Self, impl Stream<Item = Snapshot> + Send + Unpin + 'static) {
        let (tx, rx) = watch::channel(None);
        let stream = WatchStream::from_changes(rx).filter_map(futures_util::future::ready);
        (Self { service, tx }, stream)
    }

    /// Publishes `instances` as the service's full set at the server's `revision`, unless
    /// it equals the last set published. Returns the revision used, if published.
    pub(crate) fn publish(&mut self, revision: u64, mut instances: Vec<Instance>) -> Option<u64> {
        instances.sort_by(|a, b| a.id.cmp(&b.id));
        let revision = match &*self.tx.borrow() {
            Some(last) if *last.instances == *instances => return None,
            Some(last) => revision.max(last.revision + 1),
            None => revision,
        };
        let snapshot = Snapshot::new(self.service.clone(), revision, instances);
        self.tx.send_replace(Some(snapshot));
        Some(revision)
    }

    /// Resolves when the consumer dropped its stream (the watch loop can stop).
    pub(crate) async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Whether the consumer dropped its stream.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same instance for the same port, whenever it is made: `Instance::new` stamps
    /// the current millisecond, which would make two calls differ across a tick.
    fn instance(port: u16) -> Instance {
        let mut instance = Instance::new(ServiceKey::new("s"), "h", port);
        instance.id = rpc_core::InstanceId::new(format!("id-{port}"));
        instance.start_time_ms = 0;
        instance
    }

    #[tokio::test]
    async fn first_set_is_delivered_even_empty_and_duplicates_are_dropped() {
        let (mut publisher, mut stream) = SnapshotPublisher::new(ServiceKey::new("s"));
        assert_eq!(publisher.publish(5, vec![]), Some(5));
        assert_eq!(stream.next().await.unwrap().instances.len(), 0);
        assert_eq!(publisher.publish(9, vec![]), None);
        assert_eq!(
            publisher.publish(10, vec![instance(2), instance(1)]),
            Some(10)
        );
        let snapshot = stream.next().await.unwrap();
        assert_eq!(snapshot.revision, 10);
        let ports: Vec<u16> = snapshot.instances.iter().map(|i| i.port).collect();
        assert_eq!(ports, [1, 2]);
        assert_eq!(publisher.publish(11, vec![instance(1), instance(2)]), None);
    }

    #[tokio::test]
    async fn revisions_increase_even_when_the_server_goes_back() {
        let (mut publisher, _stream) = SnapshotPublisher::new(ServiceKey::new("s"));
        assert_eq!(publisher.publish(100, vec![instance(1)]), Some(100));
        assert_eq!(publisher.publish(3, vec![]), Some(101));
        assert_eq!(publisher.publish(200, vec![instance(1)]), Some(200));
    }

    #[tokio::test]
    async fn the_stream_ends_when_the_publisher_is_dropped() {
        let (mut publisher, mut stream) = SnapshotPublisher::new(ServiceKey::new("s"));
        publisher.publish(1, vec![instance(1)]);
        drop(publisher);
        assert_eq!(stream.next().await.unwrap().revision, 1);
        assert!(stream.next().await.is_none());
    }

    #[test]
    fn subscriptions_close_alone_or_all_together() {
        let root = CancellationToken::new();
        let set = SubscriptionSet::new(root.clone());
        let (one, one_token) = set.open();
        let (_two, two_token) = set.open();
        set.close(one).unwrap();
        assert!(one_token.is_cancelled());
        assert!(matches!(
            set.close(one),
            Err(RegistryError::UnknownSubscription(_))
        ));
        assert!(!two_token.is_cancelled());
        set.close_all();
        assert!(two_token.is_cancelled());
        assert_eq!(set.len(), 0);
    }
}
