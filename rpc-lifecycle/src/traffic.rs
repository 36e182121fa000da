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
//! the mark and the health. Online writes each with its [`ONLINE_REVISION`] one
//! higher, so that the registry shows a change even where the offline could not
//! withdraw it (the registry could not be written then) or a consumer's watch merged
//! the withdrawal and the new registration into no change at all: a consumer lifts the
//! closing mark it read when a changed registration of the instance reaches it, where
//! it would otherwise keep the instance out until the mark expires
//! (`closing_invoker_expire_time`, 30 s; the fleet simulator found it).
//!
//! One change runs at a time, and none once shutdown has begun: shutdown step 1 waits
//! for a change under way (`Registrations::settle`), and a change asked for after
//! that is refused ([`TrafficError::ShuttingDown`]), so an online can never register an
//! instance again behind the shutdown's back. Nor while a hot upgrade owns the
//! registrations, from its claim until it is decided, nor after this process handed
//! them over ([`TrafficError::Upgrading`]): the upgrade claims its run under the same
//! lock, and carries the offline set over to the new process.

use std::sync::Arc;

use futures_util::future::join_all;
use rpc_core::ServiceKey;
use tonic_health::ServingStatus;

use crate::registrations::{Listed, Registered};
use crate::{Lifecycle, Phase};

/// The metadata key a manual online counts its registrations of an instance in
/// (`"1"` after the first online, and so on; absent before any): see the module
/// documentation.
pub const ONLINE_REVISION: &str = "online-revision";

/// `registration` as an online writes it: its [`ONLINE_REVISION`] one higher.
fn listed_anew((registry, mut instance): Registered) -> Registered {
    let revision = instance
        .metadata
        .get(ONLINE_REVISION)
        .and_then(|revision| revision.parse::<u64>().ok())
        .unwrap_or(0);
    instance
        .metadata
        .insert(ONLINE_REVISION.to_owned(), (revision + 1).to_string());
    (registry, instance)
}

/// What a manual offline or online changed for one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrafficChange {
    /// The service whose traffic changed.
    pub service: ServiceKey,
    /// The registries (by URL, credentials redacted) it was withdrawn from (offline) or
    /// registered in again (online).
    pub registries: Vec<String>,
    /// The registries where that failed, with the registry's error. After a failed
    /// withdrawal the service is offline all the same (closing mark, NOT_SERVING) and the
    /// withdrawal is retried in the background until it holds
    /// ([`Pending::Withdrawing`](crate::Pending::Withdrawing) meanwhile), unless an
    /// online or the shutdown takes it first; after a failed registration the
    /// service is online all the same (the mark cleared, SERVING), and the registration
    /// is retried in the background until it holds (pending in
    /// [`Registration::pending`](crate::Registration::pending) meanwhile), unless an
    /// offline or the shutdown takes it first: a registry that does not answer at the
    /// moment of an online does not undo the operator's word.
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
    /// A hot upgrade owns the registrations: one is under way (the new process is about
    /// to register the same instances; a change now would be undone by it, or undo
    /// it), or this process handed them over to its successor (ask the new process).
    #[error(
        "{0}: the registrations belong to the upgrade; try again once it is decided (the new process takes the offline set over)"
    )]
    Upgrading(crate::upgrade::Refusal),
}

fn list(services: &[ServiceKey]) -> String {
    if services.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<String> = services.iter().map(ToString::to_string).collect();
    names.join(", ")
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
    /// [`TrafficError::ShuttingDown`] once the shutdown sequence has begun,
    /// [`TrafficError::Upgrading`] while a hot upgrade owns the registrations.
    pub async fn offline(
        &self,
        selects: impl Fn(&ServiceKey) -> bool,
    ) -> Result<Vec<TrafficChange>, TrafficError> {
        let registrations = &self.inner.registrations;
        let _one_at_a_time = registrations.one_change_at_a_time().await;
        let selected = self.select(&selects)?;
        let taken =
            registrations.take_selected(&selected, Listed::Registered, || self.check_serving())?;
        let offline = registrations.offline().names();
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
        registrations.withdrawn_by_offline(taken, &results, self.config().step_timeout);
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
        let registrations = &self.inner.registrations;
        let _one_at_a_time = registrations.one_change_at_a_time().await;
        let selected = self.select(&selects)?;
        let taken: Vec<Registered> = registrations
            .take_selected(&selected, Listed::Withdrawn, || self.check_serving())?
            .into_iter()
            .map(listed_anew)
            .collect();
        let offline = registrations.offline().names();
        let affected = affected(selected, &taken, |key| offline.contains(&key.interface));
        let results = join_all(
            taken
                .iter()
                .map(|(registry, instance)| async move { registry.register(instance).await }),
        )
        .await;
        let changes = changes(&affected, &taken, &results);
        registrations.restore(taken, &results, self.config().step_timeout);
        self.mark_offline(&affected, false).await;
        for change in &changes {
            tracing::info!(app = %self.name(), service = %change.service, registries = ?change.registries, failed = ?change.failed, "manually online");
        }
        Ok(changes)
    }

    /// The services that are manually offline now (by gRPC service name), sorted.
    pub fn offline_services(&self) -> Vec<Arc<str>> {
        self.inner.registrations.offline().names()
    }

    /// The services this application provides (empty before start-up bound them).
    pub fn provided_services(&self) -> Vec<ServiceKey> {
        self.inner.registrations.provided()
    }

    /// Every registration of this application, registry by registry: those registered
    /// now and those withdrawn by a manual offline.
    pub fn registrations_by_registry(&self) -> Vec<crate::Registration> {
        self.inner.registrations.by_registry()
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

    fn check_serving(&self) -> Result<(), TrafficError> {
        // The upgrade first: a process that handed over drains like one shutting down,
        // but its registrations live on, in the new process.
        if let Some(refusal) = self.inner.upgrade.gate.holds_registrations() {
            return Err(TrafficError::Upgrading(refusal));
        }
        match self.phase() {
            Phase::Serving => Ok(()),
            phase if phase < Phase::Serving => Err(TrafficError::Starting(phase)),
            phase => Err(TrafficError::ShuttingDown(phase)),
        }
    }

    /// Adds `services` to the offline set (or removes them), and turns their health
    /// NOT_SERVING (or SERVING). The whole server's health (`""`, what Kubernetes' gRPC
    /// probe asks) is NOT_SERVING while any service is offline, as `/ready` is.
    pub(crate) async fn mark_offline(&self, services: &[ServiceKey], offline: bool) {
        if services.is_empty() {
            return;
        }
        let provided = self.provided_services().len();
        let offline_set = self.inner.registrations.offline();
        let mut names = offline_set.names();
        if offline {
            names.extend(services.iter().map(|key| key.interface.clone()));
        } else {
            names.retain(|name| !services.iter().any(|key| key.interface == *name));
        }
        let any_left = !names.is_empty();
        offline_set.set(names, provided);
        // The streams of a service now offline are told to move.
        self.inner.streams.services_changed();
        let status = if offline {
            ServingStatus::NotServing
        } else {
            ServingStatus::Serving
        };
        let whole = if any_left {
            ServingStatus::NotServing
        } else {
            ServingStatus::Serving
        };
        self.inner.health.set_some(services, status, whole).await;
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
