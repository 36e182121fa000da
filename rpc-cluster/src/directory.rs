//! The directory: the live instances of one referenced service, fed by the registry.
//!
//! Snapshots are applied by instance id, so a repeated or unchanged snapshot touches no
//! connection; an older snapshot (lower revision) than the last applied is ignored;
//! an empty snapshot the registry marked as degraded (a fault, not "the last instance
//! left") keeps the last known instances when empty protection is on. A removed
//! instance leaves the pick list at once, but its connection lives on until its calls
//! in flight finish, at most `closing_invoker_expire_time` (the opposite of a known
//! Dubbo issue, where a removal destroyed invokers under calls in flight). A removal
//! that leaves no instance at all keeps the removed ones as a last resort instead
//! (`last_resort.rs`): a provider being restarted still serves while it waits for its
//! consumers to move, and there is nowhere else to move to. A changed registration of
//! a listed instance lifts the closing mark its responses set: it is the provider's
//! manual online, news newer than the mark, even when the registry never showed the
//! offline.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rpc_core::{InstanceId, ServiceKey, Snapshot, SnapshotOrigin};
use rpc_transport::ChannelOptions;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::DirectoryConfig;
use crate::fleet_latency::FleetLatency;
use crate::id_order::next_in_id_order;
use crate::invoker::{Invoker, InvokerSettings, StallBound};
use crate::last_resort::LastResort;
use crate::loadbalance::InvokerList;

/// A borrowed view of the directory's current list (see [`Directory::current`]).
pub(crate) struct CurrentList(arc_swap::Guard<Arc<InvokerList>>);

impl std::ops::Deref for CurrentList {
    type Target = InvokerList;

    fn deref(&self) -> &InvokerList {
        &self.0
    }
}

/// What [`Directory::apply`] did with a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The instance set or an instance's registration changed.
    Changed {
        /// Instances new to the directory.
        added: usize,
        /// Instances that left.
        removed: usize,
        /// Instances whose weight or metadata changed (no reconnection).
        updated: usize,
    },
    /// Same instances, same registrations: nothing touched.
    Unchanged,
    /// Revision not newer than the last applied one: ignored.
    Stale,
    /// Empty because of a registry fault: the last known instances are kept.
    EmptyProtected,
}

/// The instances of one service known to one reference.
#[derive(Debug)]
pub struct Directory {
    service: ServiceKey,
    config: DirectoryConfig,
    settings: Arc<InvokerSettings>,
    list: ArcSwap<InvokerList>,
    membership: Mutex<Membership>,
    known: watch::Sender<usize>,
    last_resort: LastResort,
}

/// Which invokers the directory holds, and the registry revision and list version they
/// came with (changed under one lock; readers use the published list).
#[derive(Debug, Default)]
struct Membership {
    last_revision: Option<u64>,
    version: u64,
    by_id: HashMap<InstanceId, Arc<Invoker>>,
}

impl Directory {
    /// An empty directory for `service`.
    pub fn new(service: ServiceKey, config: DirectoryConfig, channel: ChannelOptions) -> Self {
        let settings = Arc::new(InvokerSettings {
            channel,
            default_rtt: config.default_rtt,
            ewma_decay: config.ewma_decay,
            fleet: Arc::new(FleetLatency::new(config.default_rtt)),
            stall: config.stall_detection.then_some(StallBound {
                factor: config.stall_factor,
                floor: config.stall_floor,
            }),
        });
        Self {
            service,
            config,
            settings,
            list: ArcSwap::from_pointee(InvokerList::default()),
            membership: Mutex::new(Membership::default()),
            known: watch::Sender::new(0),
            last_resort: LastResort::default(),
        }
    }

    /// The referenced service.
    pub fn service(&self) -> &ServiceKey {
        &self.service
    }

    /// The directory's settings.
    pub fn config(&self) -> &DirectoryConfig {
        &self.config
    }

    /// The current list (cheap: one atomic load and a reference count).
    pub fn list(&self) -> Arc<InvokerList> {
        self.list.load_full()
    }

    /// The current list without touching its reference count, for the request path: a
    /// shared count would be written by every core on every pick.
    pub(crate) fn current(&self) -> CurrentList {
        CurrentList(self.list.load())
    }

    /// Told the number of known instances at every change of the list (a call waiting
    /// for a provider wakes on it and picks again).
    pub(crate) fn known_changes(&self) -> watch::Receiver<usize> {
        self.known.subscribe()
    }

    /// Resolves once at least one instance is known.
    pub async fn wait_for_provider(&self) {
        let mut rx = self.known.subscribe();
        let _ = rx.wait_for(|count| *count > 0).await;
    }

    /// Applies one registry snapshot (see the module docs for the rules).
    pub fn apply(&self, snapshot: Snapshot) -> Applied {
        if snapshot.service != self.service {
            tracing::warn!(expected = %self.service, got = %snapshot.service, "snapshot for another service ignored");
            return Applied::Stale;
        }
        let mut state = self.membership.lock();
        if state
            .last_revision
            .is_some_and(|last| snapshot.revision <= last)
        {
            return Applied::Stale;
        }
        if snapshot.instances.is_empty()
            && snapshot.origin == SnapshotOrigin::Degraded
            && self.config.empty_protection
            && !state.by_id.is_empty()
        {
            tracing::warn!(
                service = %self.service,
                kept = state.by_id.len(),
                "registry delivered an empty set after a fault; keeping the last known instances"
            );
            return Applied::EmptyProtected;
        }
        state.last_revision = Some(snapshot.revision);

        let now = Instant::now();
        let mut updated = 0;
        let mut arrived = Vec::new();
        let mut next = HashMap::with_capacity(snapshot.instances.len());
        for instance in snapshot.instances.iter() {
            // A known instance moves to the new map with its key (no id is cloned, no
            // registration unless it changed): what an event costs grows with the
            // instances that changed, beside one lookup per instance.
            if let Some((id, invoker)) = state.by_id.remove_entry(&instance.id) {
                if invoker.update(instance) {
                    updated += 1;
                    // A changed registration is news newer than a closing mark: the
                    // provider's online after an offline the registry never showed.
                    if invoker.health().clear_closing() {
                        tracing::debug!(instance = %id, "registered anew: closing mark lifted");
                    }
                }
                next.insert(id, invoker);
                continue;
            }
            // One invoker per id: a registry may list one instance twice (a Dubbo
            // provider's znode of an old session beside its new one, a hot upgrade's two
            // processes in Dubbo's layout for a moment); the first listed is kept.
            if next.contains_key(&instance.id) {
                continue;
            }
            let invoker = Arc::new(Invoker::new(instance.clone(), self.settings.clone(), now));
            next.insert(instance.id.clone(), invoker.clone());
            arrived.push(invoker);
        }
        let gone: Vec<Arc<Invoker>> = std::mem::replace(&mut state.by_id, next)
            .into_values()
            .collect();
        let (added, removed) = (arrived.len(), gone.len());
        if added == 0 && removed == 0 && updated == 0 {
            return Applied::Unchanged;
        }
        state.version += 1;
        let invokers = next_in_id_order(
            self.list.load().invokers(),
            &gone,
            arrived,
            state.by_id.values().cloned(),
        );
        let list = InvokerList::new(state.version, invokers);
        self.settings.fleet.set_instances(list.len());
        let count = list.len();
        self.list.store(Arc::new(list));
        drop(state);
        if count == 0 {
            for invoker in &gone {
                invoker.mark_removed();
            }
            let expire = self.config.closing_invoker_expire_time;
            self.last_resort.keep(gone, expire);
        } else {
            for invoker in gone.into_iter().chain(self.last_resort.take_all()) {
                self.retire(invoker);
            }
        }
        self.known.send_replace(count);
        tracing::debug!(service = %self.service, added, removed, updated, count, "directory updated");
        Applied::Changed {
            added,
            removed,
            updated,
        }
    }

    /// Closes every channel: calls in flight are cancelled. Used at shutdown, after the
    /// outbound drain.
    pub fn destroy_all(&self) {
        let invokers: Vec<_> = self
            .membership
            .lock()
            .by_id
            .drain()
            .map(|(_, i)| i)
            .collect();
        self.list.store(Arc::new(InvokerList::default()));
        for invoker in invokers.into_iter().chain(self.last_resort.take_all()) {
            invoker.mark_removed();
            invoker.destroy();
        }
    }

    /// An instance kept as a last resort and not in `tried`, for a call that finds no
    /// selectable instance in the list (see `last_resort.rs`).
    pub(crate) fn last_resort(&self, tried: &[InstanceId]) -> Option<Arc<Invoker>> {
        self.last_resort.pick(tried)
    }

    /// `invoker` refused a call (not executed, or its connection was refused): if it was
    /// kept as a last resort, it no longer is, and closes once idle.
    pub(crate) fn refused_by(&self, invoker: &Arc<Invoker>) {
        if self.last_resort.forget(invoker) {
            self.retire(invoker.clone());
        }
    }

    /// Takes a removed invoker out of service: it is no longer picked (it is not in the
    /// list), and is destroyed once idle or when the expiry time passes.
    fn retire(&self, invoker: Arc<Invoker>) {
        invoker.mark_removed();
        if !invoker.is_connected() || invoker.active() == 0 {
            invoker.destroy();
            return;
        }
        let expire = self.config.closing_invoker_expire_time;
        tokio::spawn(async move {
            if tokio::time::timeout(expire, invoker.wait_idle())
                .await
                .is_err()
            {
                tracing::warn!(
                    instance = %invoker.id(),
                    in_flight = invoker.active(),
                    "removed instance still busy after closing_invoker_expire_time; cancelling its calls"
                );
            }
            invoker.destroy();
        });
    }
}

#[cfg(test)]
mod tests;
