//! One restart: replace one instance in the order the surge bounds give (see
//! `surge.rs`), and record how it went.

use std::time::Duration;

use super::fleet::{Fleet, Instance};
use super::restart_record::RestartRecord;
use super::role::Role;
use super::surge::Order;

/// One instance to replace: which, where it sits, and when the restart began.
pub(crate) struct Replace<'a> {
    /// The instances of the role; the one at `slot` is replaced in place.
    pub(crate) instances: &'a mut Vec<Instance>,
    /// Its position among them.
    pub(crate) slot: usize,
    /// Its role.
    pub(crate) role: Role,
    /// `proxy-2`, ...
    pub(crate) name: &'a str,
    /// Time since the load started.
    pub(crate) at: Duration,
}

/// Replaces `target` in `order`, stopping the old instance gracefully or killing it.
/// `Ok` with the record of a restart done; `Err` with the record of one whose
/// replacement could not start (the run stops restarting then). With
/// [`Order::StartThenStop`] the old instance keeps serving when its replacement fails.
pub(crate) async fn restart(
    fleet: &Fleet,
    target: Replace<'_>,
    order: Order,
    graceful: bool,
) -> Result<RestartRecord, RestartRecord> {
    let Replace {
        instances,
        slot,
        role,
        name,
        at,
    } = target;
    match order {
        Order::StartThenStop => {
            let replacement = match fleet.start(role, name).await {
                Ok(instance) => instance,
                Err(error) => return Err(RestartRecord::failed(name, at, 0.0, None, &error)),
            };
            // Consumers must know the new instance before the old one leaves.
            tokio::time::sleep(fleet.propagation()).await;
            let old = std::mem::replace(&mut instances[slot], replacement);
            let stopping = std::time::Instant::now();
            let report = old.stop(graceful).await;
            let stop_ms = stopping.elapsed().as_secs_f64() * 1e3;
            let addr = instances[slot].addr();
            Ok(RestartRecord::new(name, at, stop_ms, report, addr))
        }
        Order::StopThenStart => {
            let old = instances.remove(slot);
            let stopping = std::time::Instant::now();
            let report = old.stop(graceful).await;
            let stop_ms = stopping.elapsed().as_secs_f64() * 1e3;
            let replacement = match fleet.start(role, name).await {
                Ok(instance) => instance,
                Err(error) => {
                    return Err(RestartRecord::failed(name, at, stop_ms, report, &error));
                }
            };
            // The new instance is in use once consumers hear of it.
            tokio::time::sleep(fleet.propagation()).await;
            let addr = replacement.addr();
            instances.insert(slot, replacement);
            Ok(RestartRecord::new(name, at, stop_ms, report, addr))
        }
    }
}
