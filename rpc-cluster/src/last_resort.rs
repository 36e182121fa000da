//! The last resort: instances the registry removed when no other instance was left.
//!
//! A provider being restarted unregisters first (shutdown step 1) and still serves
//! until it refuses new requests (step 3): for the whole wait of step 2 it is alive,
//! only no longer listed. When the registry's removal leaves a reference with no
//! instance at all, failing every call with "no provider" for that wait loses calls the
//! provider would have served. So the removed instances are kept here, out of the pick
//! list, and a call that finds nothing selectable is sent to one of them — as the
//! blacklist's panic mode sends to an ejected or closing instance rather than fail —
//! until it refuses (a "not executed" refusal, or a refused connection: then the call
//! fails over, or fails), `closing_invoker_expire_time` passes, or the registry lists
//! an instance again. An instance removed while others remain is never kept: the others
//! take its calls.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rpc_core::InstanceId;

use crate::invoker::Invoker;

/// Removed instances kept for calls that find nothing else. Empty nearly always: only
/// the registry's removal of the last instances fills it.
#[derive(Debug, Default)]
pub(crate) struct LastResort {
    invokers: Arc<Mutex<Vec<Arc<Invoker>>>>,
}

impl LastResort {
    /// Keeps `removed` (already marked removed) until each refuses or `expire` passes;
    /// at `expire`, those still kept are destroyed (calls still in flight on them are
    /// cancelled, as for any instance removed that long ago).
    pub(crate) fn keep(&self, removed: Vec<Arc<Invoker>>, expire: Duration) {
        if removed.is_empty() {
            return;
        }
        tracing::info!(
            kept = removed.len(),
            "the registry removed the last instances: kept as a last resort until they refuse"
        );
        let ids: Vec<InstanceId> = removed.iter().map(|i| i.id().clone()).collect();
        self.invokers.lock().extend(removed);
        let invokers = self.invokers.clone();
        tokio::spawn(async move {
            tokio::time::sleep(expire).await;
            let expired: Vec<_> = {
                let mut kept = invokers.lock();
                let (expired, still) = kept.drain(..).partition(|i| ids.contains(i.id()));
                *kept = still;
                expired
            };
            for invoker in expired {
                invoker.destroy();
            }
        });
    }

    /// Takes every kept instance out (the registry lists instances again).
    pub(crate) fn take_all(&self) -> Vec<Arc<Invoker>> {
        std::mem::take(&mut *self.invokers.lock())
    }

    /// A kept instance not in `tried`, if any: the oldest kept first.
    pub(crate) fn pick(&self, tried: &[InstanceId]) -> Option<Arc<Invoker>> {
        let kept = self.invokers.lock();
        kept.iter().find(|i| !tried.contains(i.id())).cloned()
    }

    /// Takes `invoker` out (it refused); true if it was kept.
    pub(crate) fn forget(&self, invoker: &Invoker) -> bool {
        let mut kept = self.invokers.lock();
        let before = kept.len();
        kept.retain(|i| i.id() != invoker.id());
        kept.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invoker::tests::invoker;

    #[tokio::test(start_paused = true)]
    async fn kept_until_refused_or_expired() {
        let last_resort = LastResort::default();
        let removed: Vec<_> = (0..2).map(invoker).collect();
        last_resort.keep(removed.clone(), Duration::from_secs(30));
        let first = last_resort.pick(&[]).unwrap();
        assert_eq!(first.id(), removed[0].id());
        let other = last_resort.pick(&[first.id().clone()]).unwrap();
        assert_eq!(other.id(), removed[1].id());
        assert!(last_resort.forget(&removed[0]), "it refused");
        assert!(!last_resort.forget(&removed[0]));
        assert_eq!(last_resort.pick(&[]).unwrap().id(), removed[1].id());
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert!(last_resort.pick(&[]).is_none(), "expired");
        assert!(removed[1].destroyed().is_cancelled(), "the one still kept");
        assert!(
            !removed[0].destroyed().is_cancelled(),
            "the one that refused is its directory's to retire"
        );
    }
}
