//! The instances this application announced, in which registries, and which of them a
//! manual offline withdrew for a while.
//!
//! Three writers touch this state, and the rules between them live here: start-up adds
//! registrations; a manual offline or online moves them between "registered" and
//! "withdrawn" (one change at a time, [`Registrations::one_change_at_a_time`]); shutdown
//! step 1 takes every registration for good, and the hot upgrade's hand-over gives them
//! up without withdrawing them. A registration is taken by exactly one of them: the
//! phase is checked under the same lock the registrations are taken with.
//!
//! After a failed upgrade every registration is registered again (the killed new process
//! may have taken them over), and a manual online registers the withdrawn ones again.
//! One that fails is *pending*: it is retried, with a capped
//! and jittered backoff (`backoff.rs`: 100 ms doubling to 5 s), until it holds, until
//! shutdown step 1, an abort or a hand-over takes it, or until a manual offline withdraws
//! it. So is a manual offline's withdrawal that fails (the registry had no leader): the
//! consumers that read the closing mark moved away at once, but the registry would list
//! the instance for every other consumer until the online; it is withdrawn again the
//! same way until it holds, until an online registers it again, or until it is taken. Each attempt holds the one-change-at-a-time lock, so shutdown step 1 waits for an
//! attempt under way and no attempt registers an instance behind the shutdown's back.
//! The state is visible ([`Registration::pending`]: the admin endpoint's `/status`, the
//! `rpc_registrations_pending` metric), and logged once when a registration starts
//! failing and once when it holds again — not at every attempt.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rpc_core::{Instance, OfflineServices, ServiceKey};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) use crate::registry_calls::{Registered, unregister_each};
use crate::registry_calls::{Write, attempt_each, release_each};

mod retry;

use retry::{Retried, log_held, retry_until_held, same};

/// One registration of this application, as observers (the admin endpoint's status)
/// see it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registration {
    /// The registry's URL (credentials redacted).
    pub registry: String,
    /// The instance registered there.
    pub instance: Instance,
    /// False while the service is manually offline (the registration is withdrawn and
    /// kept to be registered again).
    pub online: bool,
    /// `Some` while the registration may be missing from its registry and is being
    /// written again; `None` when it holds (or is manually offline).
    pub pending: Option<Pending>,
}

/// Why a registration may be missing from its registry, and what is done about it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pending {
    /// Registering it again (after a failed upgrade, or at a manual online) failed: it is
    /// retried with a capped backoff until it holds.
    Retrying {
        /// When the first attempt failed (tokio's clock).
        since: Instant,
        /// Attempts that failed so far.
        attempts: u32,
        /// The last attempt's error.
        last_error: String,
    },
    /// Its registry client lost its session, lease or connection and is writing its
    /// registrations again by itself
    /// ([`Registry::reregistering`](rpc_core::Registry::reregistering)).
    Reregistering,
    /// A manual offline's withdrawal failed: it is retried with a capped backoff until
    /// it holds (the registry may list the instance meanwhile).
    Withdrawing {
        /// When the first attempt failed (tokio's clock).
        since: Instant,
        /// Attempts that failed so far.
        attempts: u32,
        /// The last attempt's error.
        last_error: String,
    },
}

/// Which list of registrations an operation takes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Registered now.
    Registered,
    /// Withdrawn by a manual offline, kept to be registered again.
    Withdrawn,
}

#[derive(Default)]
struct Lists {
    registered: Vec<Registered>,
    withdrawn: Vec<Registered>,
    /// The services the application provides.
    provided: Vec<ServiceKey>,
    /// Registered ones whose registration, and withdrawn ones whose withdrawal, is
    /// retried until it holds.
    pending: Vec<Retried>,
    /// Whether a task retries `pending`.
    retrying: bool,
}

/// The registrations of one application (see the module documentation).
#[derive(Default)]
pub(crate) struct Registrations {
    /// Shared with the task that retries pending registrations.
    shared: Arc<Shared>,
    /// The provided services manually offline, shared with the provider filter.
    offline: OfflineServices,
}

#[derive(Default)]
struct Shared {
    lists: Mutex<Lists>,
    /// Held by a manual offline or online for its whole run, by each attempt of a
    /// pending registration, by the hand-over and by shutdown step 1 before they take
    /// the registrations: one change at a time, none behind the shutdown's back.
    changes: tokio::sync::Mutex<()>,
    /// Cancelled when the registrations are taken for good: retrying stops.
    taken: CancellationToken,
}

impl Registrations {
    /// Records that the application provides `service` (start-up, as it binds).
    pub(crate) fn provide(&self, service: ServiceKey) {
        self.shared.lists.lock().provided.push(service);
    }

    /// Records a registration start-up made.
    pub(crate) fn add(&self, registration: Registered) {
        self.shared.lists.lock().registered.push(registration);
    }

    /// The services the application provides (empty before start-up bound them).
    pub(crate) fn provided(&self) -> Vec<ServiceKey> {
        self.shared.lists.lock().provided.clone()
    }

    /// The instances registered now.
    pub(crate) fn registered(&self) -> Vec<Instance> {
        let lists = self.shared.lists.lock();
        lists.registered.iter().map(|(_, i)| i.clone()).collect()
    }

    /// The manual offline set (by gRPC service name), as the provider filter reads it.
    pub(crate) fn offline(&self) -> &OfflineServices {
        &self.offline
    }

    /// Every registration, registry by registry: those registered now (with whether
    /// they are pending) and those a manual offline withdrew.
    pub(crate) fn by_registry(&self) -> Vec<Registration> {
        let lists = self.shared.lists.lock();
        let registered = lists.registered.iter().map(|(registry, instance)| {
            let retried = lists
                .pending
                .iter()
                .find(|retried| same(&retried.registration, registry, instance));
            let pending = match retried {
                Some(retried) => Some(Pending::Retrying {
                    since: retried.since,
                    attempts: retried.attempts,
                    last_error: retried.last_error.clone(),
                }),
                None => registry.reregistering().then_some(Pending::Reregistering),
            };
            Registration {
                registry: registry.url().to_owned(),
                instance: instance.clone(),
                online: true,
                pending,
            }
        });
        let withdrawn = lists.withdrawn.iter().map(|(registry, instance)| {
            let pending = lists
                .pending
                .iter()
                .find(|retried| same(&retried.registration, registry, instance))
                .map(|retried| Pending::Withdrawing {
                    since: retried.since,
                    attempts: retried.attempts,
                    last_error: retried.last_error.clone(),
                });
            Registration {
                registry: registry.url().to_owned(),
                instance: instance.clone(),
                online: false,
                pending,
            }
        });
        let mut all: Vec<Registration> = registered.chain(withdrawn).collect();
        all.sort_by(|a, b| {
            (&a.registry, &a.instance.service).cmp(&(&b.registry, &b.instance.service))
        });
        all
    }

    /// Waits for a manual change under way to end and holds off later ones until the
    /// guard drops (a manual offline or online holds it for its whole run).
    pub(crate) async fn one_change_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.shared.changes.lock().await
    }

    /// The right to change registrations now, if no manual change holds it: the hot
    /// upgrade claims its run under it, so that it never begins while a manual offline
    /// or online moves registrations.
    pub(crate) fn try_one_change(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.shared.changes.try_lock().ok()
    }

    /// As [`Registrations::one_change_at_a_time`], until `bound` at most: shutdown step
    /// 1 takes it so that no online registers an instance again behind its back. `None`
    /// if the bound passed first (the change under way is then still waiting on its
    /// registry, whose own timeouts bound it).
    pub(crate) async fn settle(&self, bound: Instant) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout_at(bound, self.shared.changes.lock())
            .await
            .ok()
    }

    /// Takes every registration out, for good (shutdown step 1, an abort, the hand-over):
    /// pending ones are not retried any more.
    pub(crate) fn take_all(&self) -> Vec<Registered> {
        let mut lists = self.shared.lists.lock();
        self.shared.taken.cancel();
        lists.pending.clear();
        std::mem::take(&mut lists.registered)
    }

    /// Takes the entries of the `selected` services out of one list, if `allowed` says
    /// the change may run — checked under the lock [`Registrations::take_all`] takes, so
    /// that each registration is moved by a manual change or by the shutdown, never by
    /// both or neither.
    ///
    /// # Errors
    /// What `allowed` returned; nothing was taken.
    pub(crate) fn take_selected<E>(
        &self,
        selected: &[ServiceKey],
        from: Listed,
        allowed: impl FnOnce() -> Result<(), E>,
    ) -> Result<Vec<Registered>, E> {
        let mut lists = self.shared.lists.lock();
        allowed()?;
        let list = match from {
            Listed::Registered => &mut lists.registered,
            Listed::Withdrawn => &mut lists.withdrawn,
        };
        let (taken, kept) = std::mem::take(list)
            .into_iter()
            .partition(|(_, instance)| selected.contains(&instance.service));
        *list = kept;
        Ok(taken)
    }

    /// Puts registrations withdrawn from the start (a successor starting offline) on the
    /// withdrawn list.
    pub(crate) fn keep_withdrawn(&self, withdrawn: Vec<Registered>) {
        self.shared.lists.lock().withdrawn.extend(withdrawn);
    }

    /// Puts registrations a manual offline tried to withdraw on the withdrawn list:
    /// the operator's offline holds whatever the registry said. Those whose withdrawal
    /// failed (`results`, in the same order) are pending, withdrawn again in the
    /// background (each attempt bounded by `bound`) until it holds.
    pub(crate) fn withdrawn_by_offline<E: ToString>(
        &self,
        tried: Vec<Registered>,
        results: &[Result<(), E>],
        bound: Duration,
    ) {
        self.settle_writes(tried, Write::Withdraw, results, bound);
    }

    /// Puts registrations a manual online tried back on the registered list: the
    /// operator's online holds whatever the registry said. Those whose registration
    /// failed are pending, retried in the background (each attempt bounded by `bound`)
    /// until they hold.
    pub(crate) fn restore<E: ToString>(
        &self,
        tried: Vec<Registered>,
        results: &[Result<(), E>],
        bound: Duration,
    ) {
        self.settle_writes(tried, Write::Register, results, bound);
    }

    /// Puts the registrations `write` was `tried` on (with `results`, in the same order)
    /// on the list it is for; those that failed are pending, and a task retries them
    /// unless one does already.
    fn settle_writes<E: ToString>(
        &self,
        tried: Vec<Registered>,
        write: Write,
        results: &[Result<(), E>],
        bound: Duration,
    ) {
        debug_assert_eq!(tried.len(), results.len());
        let start = {
            let mut lists = self.shared.lists.lock();
            for (registration, result) in tried.into_iter().zip(results) {
                // An earlier pending write of it (either way) is settled by this one.
                let (registry, instance) = &registration;
                lists
                    .pending
                    .retain(|retried| !same(&retried.registration, registry, instance));
                if let Err(error) = result {
                    lists.pend(registration.clone(), write, error.to_string());
                }
                match write {
                    Write::Register => lists.registered.push(registration),
                    Write::Withdraw => lists.withdrawn.push(registration),
                }
            }
            lists.start_retrying(&self.shared.taken)
        };
        if start {
            tokio::spawn(retry_until_held(self.shared.clone(), bound));
        }
    }

    /// Gives up every registration without withdrawing it (the hot upgrade's hand-over:
    /// the new process registered the same instances), bounded by `bound`; an attempt
    /// to register a pending one again that is under way ends first (bounded by `bound`
    /// too, and cancelled past it).
    pub(crate) async fn release_all(&self, bound: Duration) {
        let _no_attempt = self.settle(Instant::now() + bound).await;
        let registrations = self.take_all();
        release_each(&registrations, bound).await;
    }

    /// Registers every current registration again, each attempt bounded by `bound`:
    /// after a failed upgrade, registrations a killed new process had taken over (same
    /// ids: the key moved to its lease, the znode to its session, the Nacos instance to
    /// its connection) become this process's again before its session ends. Registering
    /// an instance again is idempotent. Those that fail are pending, retried in the
    /// background until they hold (see the module documentation).
    pub(crate) async fn register_again(&self, bound: Duration) {
        let registrations = self.shared.lists.lock().registered.clone();
        let results = attempt_each(&registrations, bound).await;
        let start = {
            let mut lists = self.shared.lists.lock();
            for (registration, result) in registrations.into_iter().zip(results) {
                let (registry, instance) = &registration;
                let known = lists
                    .pending
                    .iter()
                    .position(|retried| same(&retried.registration, registry, instance));
                match (result, known) {
                    (Ok(()), Some(index)) => {
                        let retried = lists.pending.remove(index);
                        log_held(&registration, Write::Register, retried.attempts + 1);
                    }
                    (Ok(()), None) => {}
                    (Err(error), Some(index)) => lists.pending[index].failed(error),
                    (Err(error), None) => lists.pend(registration, Write::Register, error),
                }
            }
            lists.start_retrying(&self.shared.taken)
        };
        if start {
            tokio::spawn(retry_until_held(self.shared.clone(), bound));
        }
    }
}
