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
//! probe, to deregister what it held, until it has; the keeper then writes those its
//! client still wants again through the current connection (the replaced one may have
//! written them in between).

use std::collections::BTreeMap;
use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, ServiceInstance};
use tokio::sync::Mutex;

use crate::remote::retry::bounded;

/// Registrations by key (`service name#instance id`): service name, what was registered.
pub(super) type Registrations = BTreeMap<String, (String, ServiceInstance)>;

/// The replaced SDK connections of one client.
#[derive(Default)]
pub(super) struct RetiredConnections {
    list: Mutex<Vec<Retired>>,
}

/// One replaced connection and what it still holds.
struct Retired {
    naming: NamingService,
    holds: Registrations,
}

impl RetiredConnections {
    /// Whether every replaced connection has withdrawn what it held.
    pub(super) async fn is_empty(&self) -> bool {
        self.list.lock().await.is_empty()
    }

    /// Keeps `naming`, which holds `holds`, until it has withdrawn them.
    pub(super) async fn retire(&self, naming: NamingService, holds: Registrations) {
        if !holds.is_empty() {
            self.list.lock().await.push(Retired { naming, holds });
        }
    }

    /// Asks each replaced connection to deregister what it holds, each request bounded
    /// by `bound`, moving on from a connection at its first failure (its server still
    /// does not answer: next time); drops those that hold nothing more. The keys
    /// withdrawn.
    pub(super) async fn withdraw(&self, group: &str, bound: Duration) -> Vec<String> {
        let mut list = self.list.lock().await;
        let mut withdrawn = Vec::new();
        for retired in list.iter_mut() {
            while let Some((key, (name, nacos))) = retired.holds.pop_first() {
                let deregister = retired.naming.deregister_instance(
                    name.clone(),
                    Some(group.to_owned()),
                    nacos.clone(),
                );
                if bounded(bound, deregister).await.is_err() {
                    retired.holds.insert(key, (name, nacos));
                    break;
                }
                withdrawn.push(key);
            }
        }
        list.retain(|retired| !retired.holds.is_empty());
        withdrawn
    }
}
