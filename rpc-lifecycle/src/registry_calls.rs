//! The calls the lifecycle makes to many registrations at once — register, release,
//! unregister, or a mix of writes — each in parallel across registries, bounded, and
//! each failure logged or returned, never stopping the others.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use rpc_core::{Instance, Registry};

/// One registration: an instance and the registry it is (or was) registered in.
pub(crate) type Registered = (Arc<dyn Registry>, Instance);

/// A write the lifecycle makes to one registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// Register it (again).
    Register,
    /// Withdraw it (a manual offline).
    Withdraw,
}

/// Registers each of `registrations` in parallel, each within `bound`: the error of
/// each that failed, as text.
pub(crate) async fn attempt_each(
    registrations: &[Registered],
    bound: Duration,
) -> Vec<Result<(), String>> {
    join_all(
        registrations
            .iter()
            .map(|registration| write_one(registration, Write::Register, bound)),
    )
    .await
}

/// Makes each of `writes` in parallel, each within `bound`: the error of each that
/// failed, as text.
pub(crate) async fn write_each(
    writes: &[(Registered, Write)],
    bound: Duration,
) -> Vec<Result<(), String>> {
    join_all(
        writes
            .iter()
            .map(|(registration, write)| write_one(registration, *write, bound)),
    )
    .await
}

async fn write_one(
    (registry, instance): &Registered,
    write: Write,
    bound: Duration,
) -> Result<(), String> {
    let call = async {
        match write {
            Write::Register => registry.register(instance).await,
            Write::Withdraw => registry.unregister(instance).await,
        }
    };
    match tokio::time::timeout(bound, call).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {bound:?}")),
    }
}

/// Releases every one of `registrations` in parallel, within `bound`; a failure or the
/// bound is logged (the registry's session then decides).
pub(crate) async fn release_each(registrations: &[Registered], bound: Duration) {
    let each = registrations.iter().map(|(registry, instance)| async move {
        if let Err(error) = registry.release(instance).await {
            tracing::warn!(instance = %instance.id, registry = registry.url(), %error, "a registration could not be released");
        }
    });
    if tokio::time::timeout(bound, join_all(each)).await.is_err() {
        tracing::warn!(?bound, "releasing the registrations timed out");
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
