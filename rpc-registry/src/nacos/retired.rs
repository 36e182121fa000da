//! SDK connections a failover replaced (`ConnectionKeeper::fail_over`), kept until their
//! instances are withdrawn.
//!
//! nacos-sdk keeps a registration's retry task until a deregistration *succeeds* (one
//! that fails is not queued), and writes every registration again whenever its
//! connection comes back — to whichever server it reaches; Nacos gives an address to
//! the connection that wrote it last. A replaced connection dropped as it is would
//! therefore write its instances again once its server answers, and own them: an
//! `unregister` or `close` through the current connection would then leave them listed
//! until the process exits. So each replaced connection is kept and asked, at every
//! probe, to deregister what it held, until it has — and once more at the next probe,
//! since the SDK's retry loop may have written an instance again between our
//! deregistration's answer and the removal of its retry task; after each, the keeper
//! writes those its client still wants again through the current connection (the
//! replaced one may have written them in between).

use std::collections::BTreeMap;
use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, ServiceInstance};
use tokio::sync::Mutex;

use crate::remote::retry::bounded;

/// How often a closed client asks a replaced connection again to withdraw what it holds.
pub(super) const RETRY_AFTER_CLOSE: Duration = Duration::from_secs(1);
/// For how long a closed client goes on asking.
pub(super) const ASK_AFTER_CLOSE: Duration = Duration::from_secs(60);

/// Registrations by key (`service name#instance id`): service name, what was registered.
pub(super) type Registrations = BTreeMap<String, (String, ServiceInstance)>;

/// The replaced SDK connections of one client.
#[derive(Default)]
pub(super) struct RetiredConnections {
    list: Mutex<Vec<Retired>>,
}

/// One replaced connection, what it still holds, and what it withdrew at the last probe
/// (deregistered once more at the next one).
struct Retired {
    naming: NamingService,
    holds: Registrations,
    confirm: Registrations,
}

impl RetiredConnections {
    /// Whether every replaced connection has withdrawn what it held.
    pub(super) async fn is_empty(&self) -> bool {
        self.list.lock().await.is_empty()
    }

    /// Keeps `naming`, which holds `holds`, until it has withdrawn them.
    pub(super) async fn retire(&self, naming: NamingService, holds: Registrations) {
        if !holds.is_empty() {
            self.list.lock().await.push(Retired {
                naming,
                holds,
                confirm: Registrations::new(),
            });
        }
    }

    /// Asks each replaced connection to deregister, once more, what it withdrew at the
    /// last call, then what it still holds, each request bounded by `bound`, moving on
    /// from a connection at its first failure (its server still does not answer: next
    /// time); drops those left with nothing. The keys deregistered. Safe to cancel: an
    /// entry is removed only once its deregistration succeeded.
    pub(super) async fn withdraw(&self, group: &str, bound: Duration) -> Vec<String> {
        let mut list = self.list.lock().await;
        let mut withdrawn = Vec::new();
        for retired in list.iter_mut() {
            let confirmed = deregister_each(&retired.naming, &retired.confirm, group, bound).await;
            for key in &confirmed {
                retired.confirm.remove(key);
            }
            withdrawn.extend(confirmed);
            if !retired.confirm.is_empty() {
                continue;
            }
            let done = deregister_each(&retired.naming, &retired.holds, group, bound).await;
            for key in &done {
                if let Some(registration) = retired.holds.remove(key) {
                    retired.confirm.insert(key.clone(), registration);
                }
            }
            withdrawn.extend(done);
        }
        list.retain(|retired| !retired.holds.is_empty() || !retired.confirm.is_empty());
        withdrawn
    }
}

/// Deregisters `registrations` through `naming` in order, each bounded by `bound`,
/// until one fails; the keys deregistered.
pub(super) async fn deregister_each(
    naming: &NamingService,
    registrations: &Registrations,
    group: &str,
    bound: Duration,
) -> Vec<String> {
    let mut done = Vec::new();
    for (key, (name, nacos)) in registrations {
        let deregister =
            naming.deregister_instance(name.clone(), Some(group.to_owned()), nacos.clone());
        if bounded(bound, deregister).await.is_err() {
            break;
        }
        done.push(key.clone());
    }
    done
}
