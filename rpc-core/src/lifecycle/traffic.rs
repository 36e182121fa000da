//! Manual offline and online: taking provided services out of traffic for a while
//! without stopping the application, and bringing them back (the `offline` / `online`
//! commands of Dubbo's QoS port).
//!
//! Offline does, for each selected service, what shutdown steps 1 and 2 do for all of
//! them, and nothing after: its health turns NOT_SERVING, its responses carry the
//! closing mark (so our consumers stop choosing the instance within one response), and
//! its registrations are withdrawn (so every other consumer learns it from the
//! registry). Requests that still arrive are served: nothing is refused or drained.
//! The withdrawn registrations are kept, and online registers them again and clears
//! the mark and the health.
//!
//! One change runs at a time, and none once shutdown has begun: shutdown step 1 waits
//! for a change under way ([`Lifecycle::settle_traffic`]), and a change asked for after
//! that is refused ([`TrafficError::ShuttingDown`]), so an online can never register an
//! instance again behind the shutdown's back.

use std::sync::Arc;

use futures_util::future::join_all;
use tokio::time::Instant;
use tonic_health::ServingStatus;

use super::{Lifecycle, Parts, Phase};
use crate::registry::Registry;
use crate::{Instance, ServiceKey};

/// One registration: an instance and the registry it is (or was) registered in.
type Registered = (Arc<dyn Registry>, Instance);

/// What a manual offline or online changed for one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrafficChange {
    /// The service whose traffic changed.
    pub service: ServiceKey,
    /// The registries (by URL, credentials redacted) it was withdrawn from (offline) or
    /// registered in again (online).
    pub registries: Vec<String>,
    /// The registries where that failed, with the registry's error. After a failed
    /// withdrawal the service is offline all the same (closing mark, NOT_SERVING) and its
    /// registration expires with the registry session; after a failed registration the
    /// service stays offline, and a later online tries again.
    pub failed: Vec<(String, String)>,
}

/// Why a manual offline or online was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrafficError {
    /// No provided service matches the selection.
    #[error("no provided service matches (provided: {})", list(.provided))]
    NoMatch {
        /// The services the application provides.
        provided: Vec<ServiceKey>,
    },
    /// Start-up has not finished: nothing is registered yet.
    #[error("start-up has not finished (phase {0}): nothing is registered yet")]
    Starting(Phase),
    /// The shutdown sequence has begun: it withdraws every registration for good, and a
    /// manual change would race it.
    #[error(
        "the application is shutting down (phase {0}): its registrations are being withdrawn for good"
    )]
    ShuttingDown(Phase),
}

fn list(services: &[ServiceKey]) -> String {
    if services.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<String> = services.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// One registration of this application, as observers (the admin endpoint's status)
/// see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The registry's URL (credentials redacted).
    pub registry: String,
    /// The instance registered there.
    pub instance: Instance,
    /// False while the service is manually offline (the registration is withdrawn and
    /// kept to be registered again).
    pub online: bool,
}

impl Lifecycle {
    /// Takes the provided services that `selects` accepts out of traffic, without
    /// stopping them: NOT_SERVING in the health service, the closing mark on their
    /// responses, and their registrations withdrawn (kept for [`Lifecycle::online`]).
    /// Services already offline are left as they are and not reported.
    ///
    /// # Errors
    /// [`TrafficError::NoMatch`] when `selects` accepts no provided service,
    /// [`TrafficError::Starting`] before the application is serving,
    /// [`TrafficError::ShuttingDown`] once the shutdown sequence has begun.
    pub async fn offline(
        &self,
        selects: impl Fn(&ServiceKey) -> bool,
    ) -> Result<Vec<TrafficChange>, TrafficError> {
        let _one_at_a_time = self.inner.traffic.lock().await;
        let selected = self.select(&selects)?;
        let taken = self.take_selected(&selected, |parts| &mut parts.registrations)?;
        let offline = self.inner.offline.names();
        let affected = affected(selected, &taken, |key| !offline.contains(&key.interface));
        // Consumers are told first, by the mark on the next response; the registry then
        // tells the rest.
        self.mark_offline(&affected, true).await;
        let results = join_all(
            taken
                .iter()
                .map(|(registry, instance)| async move { registry.unregister(instance).await }),
        )
        .await;
        let changes = changes(&affected, &taken, &results);
        self.inner.parts.lock().withdrawn.extend(taken);
        for change in &changes {
            tracing::info!(app = %self.name(), service = %change.service, registries = ?change.registries, failed = ?change.failed, "manually offline");
        }
        Ok(changes)
    }

    /// Brings the provided services that `selects` accepts back into traffic: registers
    /// their withdrawn registrations again, then clears the closing mark and turns
    /// their health SERVING. Services that are not offline are left as they are and not
    /// reported.
    ///
    /// # Errors
    /// As [`Lifecycle::offline`].
    pub async fn online(
        &self,
        selects: impl Fn(&ServiceKey) -> bool,
    ) -> Result<Vec<TrafficChange>, TrafficError> {
        let _one_at_a_time = self.inner.traffic.lock().await;
        let selected = self.select(&selects)?;
        let taken = self.take_selected(&selected, |parts| &mut parts.withdrawn)?;
        let offline = self.inner.offline.names();
        let affected = affected(selected, &taken, |key| offline.contains(&key.interface));
        let results = join_all(
            taken
                .iter()
                .map(|(registry, instance)| async move { registry.register(instance).await }),
        )
        .await;
        let changes = changes(&affected, &taken, &results);
        {
            let mut parts = self.inner.parts.lock();
            for ((registry, instance), result) in taken.into_iter().zip(&results) {
                match result {
                    Ok(()) => parts.registrations.push((registry, instance)),
                    Err(_) => parts.withdrawn.push((registry, instance)),
                }
            }
        }
        // A service comes back only once every one of its registrations is back.
        let back: Vec<ServiceKey> = changes
            .iter()
            .filter(|change| change.failed.is_empty())
            .map(|change| change.service.clone())
            .collect();
        self.mark_offline(&back, false).await;
        for change in &changes {
            tracing::info!(app = %self.name(), service = %change.service, registries = ?change.registries, failed = ?change.failed, "manually online");
        }
        Ok(changes)
    }

    /// The services that are manually offline now (by gRPC service name), sorted.
    pub fn offline_services(&self) -> Vec<Arc<str>> {
        self.inner.offline.names()
    }

    /// The services this application provides (empty before start-up bound them).
    pub fn provided_services(&self) -> Vec<ServiceKey> {
        self.inner.parts.lock().provided.clone()
    }

    /// Every registration of this application, registry by registry: those registered
    /// now and those withdrawn by a manual offline.
    pub fn registrations_by_registry(&self) -> Vec<Registration> {
        let parts = self.inner.parts.lock();
        let entry = |online: bool| {
            move |(registry, instance): &Registered| Registration {
                registry: registry.url().to_owned(),
                instance: instance.clone(),
                online,
            }
        };
        let mut all: Vec<Registration> = parts
            .registrations
            .iter()
            .map(entry(true))
            .chain(parts.withdrawn.iter().map(entry(false)))
            .collect();
        all.sort_by(|a, b| {
            (&a.registry, &a.instance.service).cmp(&(&b.registry, &b.instance.service))
        });
        all
    }

    /// Waits (until `bound` at most) for a manual offline or online under way to end,
    /// and holds off later ones until the returned guard drops. Shutdown step 1 calls it
    /// before it withdraws the registrations, so that no online registers an instance
    /// again, nor marks it serving, after the step. `None` if the bound passed first
    /// (the change under way is then still waiting on its registry, whose own timeouts
    /// bound it).
    pub(super) async fn settle_traffic(
        &self,
        bound: Instant,
    ) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout_at(bound, self.inner.traffic.lock())
            .await
            .ok()
    }

    /// The provided services `selects` accepts, or why there is nothing to change.
    fn select(
        &self,
        selects: &impl Fn(&ServiceKey) -> bool,
    ) -> Result<Vec<ServiceKey>, TrafficError> {
        self.check_serving()?;
        let provided = self.provided_services();
        let selected: Vec<ServiceKey> = provided.iter().filter(|k| selects(k)).cloned().collect();
        if selected.is_empty() {
            return Err(TrafficError::NoMatch { provided });
        }
        Ok(selected)
    }

    /// Takes the entries of the `selected` services out of one list of the parts (the
    /// registrations, or those a manual offline withdrew), once the application is
    /// still serving — checked under the lock shutdown step 1 takes the registrations
    /// with, so that each registration is withdrawn by this change or by the shutdown,
    /// never by both or neither.
    fn take_selected(
        &self,
        selected: &[ServiceKey],
        list: impl FnOnce(&mut Parts) -> &mut Vec<Registered>,
    ) -> Result<Vec<Registered>, TrafficError> {
        let mut parts = self.inner.parts.lock();
        self.check_serving()?;
        let list = list(&mut parts);
        let (taken, kept) = std::mem::take(list)
            .into_iter()
            .partition(|(_, instance)| selected.contains(&instance.service));
        *list = kept;
        Ok(taken)
    }

    fn check_serving(&self) -> Result<(), TrafficError> {
        match self.phase() {
            Phase::Serving => Ok(()),
            phase if phase < Phase::Serving => Err(TrafficError::Starting(phase)),
            phase => Err(TrafficError::ShuttingDown(phase)),
        }
    }

    /// Adds `services` to the offline set (or removes them), and turns their health
    /// NOT_SERVING (or SERVING). The whole server's health (`""`, what Kubernetes' gRPC
    /// probe asks) is NOT_SERVING while any service is offline, as `/ready` is.
    async fn mark_offline(&self, services: &[ServiceKey], offline: bool) {
        if services.is_empty() {
            return;
        }
        let provided = self.provided_services().len();
        let mut names = self.inner.offline.names();
        if offline {
            names.extend(services.iter().map(|key| key.interface.clone()));
        } else {
            names.retain(|name| !services.iter().any(|key| key.interface == *name));
        }
        let any_left = !names.is_empty();
        self.inner.offline.set(names, provided);
        let status = if offline {
            ServingStatus::NotServing
        } else {
            ServingStatus::Serving
        };
        for service in services {
            self.inner
                .health
                .set_service_status(&*service.interface, status)
                .await;
        }
        let whole = if any_left {
            ServingStatus::NotServing
        } else {
            ServingStatus::Serving
        };
        self.inner.health.set_service_status("", whole).await;
    }
}

/// The selected services a change affects: those `changes_state` says it moves (into
/// or out of the offline set), and those with registrations `taken` (a service a
/// partly failed online left offline, but registered in some registries).
fn affected(
    selected: Vec<ServiceKey>,
    taken: &[Registered],
    changes_state: impl Fn(&ServiceKey) -> bool,
) -> Vec<ServiceKey> {
    selected
        .into_iter()
        .filter(|key| changes_state(key) || taken.iter().any(|(_, i)| i.service == *key))
        .collect()
}

/// One change per service in `services`, naming the registries where the operation on
/// its registrations (`taken`, with `results` in the same order) succeeded or failed.
fn changes<E: std::fmt::Display>(
    services: &[ServiceKey],
    taken: &[Registered],
    results: &[Result<(), E>],
) -> Vec<TrafficChange> {
    services
        .iter()
        .map(|service| {
            let mut change = TrafficChange {
                service: service.clone(),
                registries: Vec::new(),
                failed: Vec::new(),
            };
            for ((registry, instance), result) in taken.iter().zip(results) {
                if instance.service != *service {
                    continue;
                }
                match result {
                    Ok(()) => change.registries.push(registry.url().to_owned()),
                    Err(error) => change
                        .failed
                        .push((registry.url().to_owned(), error.to_string())),
                }
            }
            change
        })
        .collect()
}
