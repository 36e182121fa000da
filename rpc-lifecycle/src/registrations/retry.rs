//! Pending registrations: those whose registration failed (after a failed upgrade, or
//! at a manual online), retried in the background with a capped, jittered backoff until
//! they hold, until they are taken for good, or until a manual offline withdraws them;
//! and those whose withdrawal at a manual offline failed, withdrawn again the same way
//! until it holds, until they are taken for good, or until an online registers them
//! (see the module above).

use std::sync::Arc;
use std::time::Duration;

use rpc_core::{Instance, Registry};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Lists, Registered, Shared};
use crate::backoff::RetryDelays;
use crate::registry_calls::{Write, write_each};

/// A registration being written again, and how it went so far.
pub(super) struct Retried {
    pub(super) registration: Registered,
    /// What is retried: registering it (it is on the registered list) or withdrawing it
    /// (on the withdrawn list).
    pub(super) write: Write,
    pub(super) since: Instant,
    pub(super) attempts: u32,
    pub(super) last_error: String,
}

impl Lists {
    /// Makes `registration` pending: `write` failed with `error` (logged here, once:
    /// not at every attempt).
    pub(super) fn pend(&mut self, registration: Registered, write: Write, error: String) {
        let (registry, instance) = &registration;
        match write {
            Write::Register => {
                tracing::warn!(instance = %instance.id, registry = registry.url(), %error, "registering failed; retrying until it holds");
            }
            Write::Withdraw => {
                tracing::warn!(instance = %instance.id, registry = registry.url(), %error, "withdrawing failed (manual offline); retrying until it holds");
            }
        }
        self.pending.push(Retried {
            registration,
            write,
            since: Instant::now(),
            attempts: 1,
            last_error: error,
        });
    }

    /// Whether a task must start retrying the pending registrations now (none does
    /// yet, and they are not taken for good); it is counted as started.
    pub(super) fn start_retrying(&mut self, taken: &CancellationToken) -> bool {
        let start = !self.pending.is_empty() && !self.retrying && !taken.is_cancelled();
        self.retrying |= start;
        start
    }
}

impl Retried {
    pub(super) fn failed(&mut self, error: String) {
        self.attempts += 1;
        self.last_error = error;
    }
}

/// Whether `registration` is `instance` in `registry` (the same client, not merely the
/// same URL).
pub(super) fn same(
    registration: &Registered,
    registry: &Arc<dyn Registry>,
    instance: &Instance,
) -> bool {
    Arc::ptr_eq(&registration.0, registry) && registration.1.id == instance.id
}

/// The task that retries the pending registrations until none is left: each round
/// waits for the next delay, then, holding the one-change-at-a-time lock, drops those
/// no longer on the list their write is for (a registration taken by a manual offline,
/// a withdrawal taken back by an online) and tries the others again, each bounded by
/// `bound`. Ends when the registrations are taken for good.
pub(super) async fn retry_until_held(shared: Arc<Shared>, bound: Duration) {
    let mut delays = RetryDelays::new();
    loop {
        tokio::select! {
            () = shared.taken.cancelled() => return,
            () = tokio::time::sleep(delays.next_delay()) => {}
        }
        let _one_change = tokio::select! {
            () = shared.taken.cancelled() => return,
            guard = shared.changes.lock() => guard,
        };
        let tried: Vec<(Registered, Write)> = {
            let mut lists = shared.lists.lock();
            let Lists {
                registered,
                withdrawn,
                pending,
                ..
            } = &mut *lists;
            pending.retain(|retried| {
                let (registry, instance) = &retried.registration;
                let list = match retried.write {
                    Write::Register => &*registered,
                    Write::Withdraw => &*withdrawn,
                };
                list.iter()
                    .any(|(r, i)| Arc::ptr_eq(r, registry) && i.id == instance.id)
            });
            pending
                .iter()
                .map(|retried| (retried.registration.clone(), retried.write))
                .collect()
        };
        // Cancelled by a shutdown that did not wait for it: its registrations are taken.
        let results = tokio::select! {
            () = shared.taken.cancelled() => return,
            results = write_each(&tried, bound) => results,
        };
        let mut lists = shared.lists.lock();
        for (((registry, instance), _), result) in tried.iter().zip(results) {
            let Some(index) = lists
                .pending
                .iter()
                .position(|retried| same(&retried.registration, registry, instance))
            else {
                continue;
            };
            match result {
                Ok(()) => {
                    let retried = lists.pending.remove(index);
                    log_held(&retried.registration, retried.write, retried.attempts + 1);
                }
                Err(error) => lists.pending[index].failed(error),
            }
        }
        if lists.pending.is_empty() {
            lists.retrying = false;
            return;
        }
    }
}

/// The one line that says a pending write holds at last.
pub(super) fn log_held((registry, instance): &Registered, write: Write, attempts: u32) {
    match write {
        Write::Register => {
            tracing::info!(instance = %instance.id, registry = registry.url(), attempts, "registered again; the registration holds");
        }
        Write::Withdraw => {
            tracing::info!(instance = %instance.id, registry = registry.url(), attempts, "withdrawn; the manual offline holds in the registry");
        }
    }
}
