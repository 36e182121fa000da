//! Deregistrations not yet confirmed, retried until they are.
//!
//! nacos-sdk 0.8 keeps a *redo task* for every service it registered an instance of
//! (`naming/redo`: one per service, keyed by namespace, group and service name) and runs
//! it again after each reconnection. Only a deregistration the server *answered* removes
//! it (`execute_by_deregister_with_redo`): one that fails is not retried, and its redo
//! task stays — so a failed `unregister` came back after the next reconnection, and an
//! instance given up with `release` (whose redo task nothing removed) was written again
//! by the old connection after a reconnection, taking it back from the connection that
//! holds it now. The SDK has no other way to drop a redo task (and no way to close a
//! `NamingService`: its redo tasks keep its connection open).
//!
//! So every deregistration this client owes, for `unregister` and for `release` alike,
//! is recorded here *before* it is sent and removed only once the server answered it;
//! the probe (`presence.rs`) sends those still owed again at every tick, and a close
//! sends them once more (then in the background for a while). The server applies a
//! deregistration to the sending connection's own registration only (rnacos refuses to
//! delete an ephemeral instance another connection registered last; Nacos 2 keeps one
//! publication per connection), so the one a `release` sends leaves the new holder's
//! instance in place.

use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, ServiceInstance};
use tokio::sync::Mutex;

use crate::nacos::retired::{Registrations, deregister_each};

/// The deregistrations one client owes, by registration key.
#[derive(Default)]
pub(super) struct Withdrawals {
    owed: Mutex<Registrations>,
}

impl Withdrawals {
    /// Whether none is owed.
    pub(super) async fn is_empty(&self) -> bool {
        self.owed.lock().await.is_empty()
    }

    /// Records that `registration` (by `key`) is to be deregistered.
    pub(super) async fn owe(&self, key: String, registration: (String, ServiceInstance)) {
        self.owed.lock().await.insert(key, registration);
    }

    /// The deregistration of `key` was answered (or is not wanted any more: the
    /// instance was registered again).
    pub(super) async fn settle(&self, key: &str) {
        self.owed.lock().await.remove(key);
    }

    /// Takes every deregistration owed (a failover hands them to the connection it
    /// replaced, which holds their redo tasks).
    pub(super) async fn take(&self) -> Registrations {
        std::mem::take(&mut *self.owed.lock().await)
    }

    /// Sends every deregistration owed through `naming` in order, each bounded by
    /// `bound`, until one fails; those answered are settled. How many were settled and
    /// how many are still owed. Safe to cancel: an entry is removed only once answered.
    pub(super) async fn send(
        &self,
        naming: &NamingService,
        group: &str,
        bound: Duration,
    ) -> (usize, usize) {
        let mut owed = self.owed.lock().await;
        if owed.is_empty() {
            return (0, 0);
        }
        let settled = deregister_each(naming, &owed, group, bound).await;
        for key in &settled {
            owed.remove(key);
        }
        (settled.len(), owed.len())
    }
}
