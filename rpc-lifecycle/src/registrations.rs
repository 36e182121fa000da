//! The instances this application announced, in which registries, and which of them a
//! manual offline withdrew for a while.
//!
//! Three writers touch this state, and the rules between them live here: start-up adds
//! registrations; a manual offline or online moves them between "registered" and
//! "withdrawn" (one change at a time, [`Registrations::one_change_at_a_time`]); shutdown
//! step 1 takes every registration for good, and the hot upgrade's hand-over gives them
//! up without withdrawing them. A registration is taken by exactly one of them: the
//! phase is checked under the same lock the registrations are taken with.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use parking_lot::Mutex;
use rpc_core::{Instance, OfflineServices, Registry, ServiceKey};
use tokio::time::Instant;

/// One registration: an instance and the registry it is (or was) registered in.
pub(crate) type Registered = (Arc<dyn Registry>, Instance);

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
}

/// The registrations of one application (see the module documentation).
#[derive(Default)]
pub(crate) struct Registrations {
    lists: Mutex<Lists>,
    /// The provided services manually offline, shared with the provider filter.
    offline: OfflineServices,
    /// Held by a manual offline or online for its whole run, and by shutdown step 1
    /// before it takes the registrations: one change at a time, none behind the
    /// shutdown's back.
    changes: tokio::sync::Mutex<()>,
}

impl Registrations {
    /// Records that the application provides `service` (start-up, as it binds).
    pub(crate) fn provide(&self, service: ServiceKey) {
        self.lists.lock().provided.push(service);
    }

    /// Records a registration start-up made.
    pub(crate) fn add(&self, registration: Registered) {
        self.lists.lock().registered.push(registration);
    }

    /// The services the application provides (empty before start-up bound them).
    pub(crate) fn provided(&self) -> Vec<ServiceKey> {
        self.lists.lock().provided.clone()
    }

    /// The instances registered now.
    pub(crate) fn registered(&self) -> Vec<Instance> {
        let lists = self.lists.lock();
        lists.registered.iter().map(|(_, i)| i.clone()).collect()
    }

    /// The manual offline set (by gRPC service name), as the provider filter reads it.
    pub(crate) fn offline(&self) -> &OfflineServices {
        &self.offline
    }

    /// Every registration, registry by registry: those registered now and those a
    /// manual offline withdrew.
    pub(crate) fn by_registry(&self) -> Vec<Registration> {
        let lists = self.lists.lock();
        let entry = |online: bool| {
            move |(registry, instance): &Registered| Registration {
                registry: registry.url().to_owned(),
                instance: instance.clone(),
                online,
            }
        };
        let mut all: Vec<Registration> = lists
            .registered
            .iter()
            .map(entry(true))
            .chain(lists.withdrawn.iter().map(entry(false)))
            .collect();
        all.sort_by(|a, b| {
            (&a.registry, &a.instance.service).cmp(&(&b.registry, &b.instance.service))
        });
        all
    }

    /// Waits for a manual change under way to end and holds off later ones until the
    /// guard drops (a manual offline or online holds it for its whole run).
    pub(crate) async fn one_change_at_a_time(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.changes.lock().await
    }

    /// The right to change registrations now, if no manual change holds it: the hot
    /// upgrade claims its run under it, so that it never begins while a manual offline
    /// or online moves registrations.
    pub(crate) fn try_one_change(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.changes.try_lock().ok()
    }

    /// As [`Registrations::one_change_at_a_time`], until `bound` at most: shutdown step
    /// 1 takes it so that no online registers an instance again behind its back. `None`
    /// if the bound passed first (the change under way is then still waiting on its
    /// registry, whose own timeouts bound it).
    pub(crate) async fn settle(&self, bound: Instant) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout_at(bound, self.changes.lock())
            .await
            .ok()
    }

    /// Takes every registration out, for good (shutdown step 1, an abort, the hand-over).
    pub(crate) fn take_all(&self) -> Vec<Registered> {
        std::mem::take(&mut self.lists.lock().registered)
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
        let mut lists = self.lists.lock();
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

    /// Puts registrations a manual offline withdrew on the withdrawn list.
    pub(crate) fn keep_withdrawn(&self, withdrawn: Vec<Registered>) {
        self.lists.lock().withdrawn.extend(withdrawn);
    }

    /// Puts registrations a manual online tried back: those registered again on the
    /// registered list, the others on the withdrawn list (a later online tries again).
    pub(crate) fn restore<E>(&self, tried: Vec<Registered>, results: &[Result<(), E>]) {
        let mut lists = self.lists.lock();
        for (registration, result) in tried.into_iter().zip(results) {
            match result {
                Ok(()) => lists.registered.push(registration),
                Err(_) => lists.withdrawn.push(registration),
            }
        }
    }

    /// Gives up every registration without withdrawing it (the hot upgrade's hand-over:
    /// the new process registered the same instances), bounded by `bound`.
    pub(crate) async fn release_all(&self, bound: Duration) {
        let registrations = self.take_all();
        each_within(&registrations, Redo::Release, bound).await;
    }

    /// Registers every current registration again, bounded by `bound`: after a failed
    /// upgrade, registrations a killed new process had taken over (same ids: the key
    /// moved to its lease, the znode to its session, the Nacos instance to its
    /// connection) become this process's again before its session ends. Registering an
    /// instance again is idempotent.
    pub(crate) async fn register_again(&self, bound: Duration) {
        let registrations = self.lists.lock().registered.clone();
        each_within(&registrations, Redo::Register, bound).await;
    }
}

/// What the hot upgrade does again to every registration.
#[derive(Clone, Copy, Debug)]
enum Redo {
    /// Give it up without withdrawing it (after the hand-over).
    Release,
    /// Register it again (after a failed upgrade).
    Register,
}

/// Does `redo` to every one of `registrations` in parallel, within `bound`; a failure
/// or the bound is logged (the registry's session then decides).
async fn each_within(registrations: &[Registered], redo: Redo, bound: Duration) {
    let each = registrations.iter().map(|(registry, instance)| async move {
        let result = match redo {
            Redo::Release => registry.release(instance).await,
            Redo::Register => registry.register(instance).await,
        };
        if let Err(error) = result {
            tracing::warn!(instance = %instance.id, registry = registry.url(), %error, ?redo, "a registration could not be redone");
        }
    });
    if tokio::time::timeout(bound, join_all(each)).await.is_err() {
        tracing::warn!(?bound, ?redo, "redoing the registrations timed out");
    }
}

/// Unregisters every one of `registrations` in parallel, counting in `withdrawn` those
/// that succeeded (read by the caller even if it stops waiting early). A failure is
/// logged: the registration expires with its registry session.
pub(crate) async fn unregister_each(registrations: &[Registered], withdrawn: &AtomicUsize) {
    let withdrawals = registrations.iter().map(|(registry, instance)| async move {
        match registry.unregister(instance).await {
            Ok(()) => {
                withdrawn.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(instance = %instance.id, %error, "unregister failed; the registration will expire");
            }
        }
    });
    join_all(withdrawals).await;
}
