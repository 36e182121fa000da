//! The calls the lifecycle makes to many registrations at once — register, release,
//! unregister — each in parallel across registries, bounded, and each failure logged
//! or returned, never stopping the others.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use rpc_core::{Instance, Registry};

/// One registration: an instance and the registry it is (or was) registered in.
pub(crate) type Registered = (Arc<dyn Registry>, Instance);

/// Registers each of `registrations` in parallel, each within `bound`: the error of
/// each that failed, as text.
pub(crate) async fn attempt_each(
    registrations: &[Registered],
    bound: Duration,
) -> Vec<Result<(), String>> {
    let each = registrations.iter().map(|(registry, instance)| async move {
        match tokio::time::timeout(bound, registry.register(instance)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer within {bound:?}")),
        }
    });
    join_all(each).await
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
