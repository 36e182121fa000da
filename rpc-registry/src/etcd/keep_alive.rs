//! Keeping one etcd lease alive: a keep-alive stream that renews it every third of its
//! TTL, opened again (with a capped backoff) when it breaks, until etcd says the lease
//! is gone or it runs out unrenewed (lost), or another lease replaced it. What follows a
//! loss (a new lease, the registrations written under it) is the keeper's (`lease.rs`).

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::etcd::client::EtcdClient;
use crate::etcd::error::{call, is_lease_gone};
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure};

/// Why keeping one lease alive ended.
pub(super) enum KeepAliveEnd {
    /// etcd no longer knows the lease (or will have forgotten it by now).
    Lost,
    /// Another lease became current, or the client is closing.
    Replaced,
}

/// Keeps `lease` of `etcd` alive (a keep-alive every third of `ttl`, each answer awaited
/// at most `request_timeout`) until it is lost, replaced (`lease_rx` names another), or
/// `lifetime` closes.
pub(super) async fn keep_alive(
    etcd: &EtcdClient,
    lifetime: &ClientLifetime,
    lease: i64,
    ttl: Duration,
    lease_rx: &mut watch::Receiver<Option<i64>>,
    request_timeout: Duration,
) -> KeepAliveEnd {
    let interval = (ttl / 3).max(Duration::from_millis(500));
    let mut backoff = Backoff::new();
    // One warning when opening the keep-alive starts failing, not one per attempt.
    let mut failing = false;
    // The lease was granted or renewed moments ago; etcd forgets it `ttl` after the
    // last renewal it received.
    let mut renewed_at = Instant::now();
    loop {
        if *lease_rx.borrow_and_update() != Some(lease) {
            return KeepAliveEnd::Replaced;
        }
        if renewed_at.elapsed() >= ttl {
            return KeepAliveEnd::Lost;
        }
        let mut stream = match call(request_timeout, etcd.lease_keep_alive(lease)).await {
            Ok(opened) => opened,
            Err(Failure::Failed(error)) if is_lease_gone(&error) => {
                return KeepAliveEnd::Lost;
            }
            Err(failure) => {
                let error = failure.into_source();
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(url = %lifetime.url, lease, %error, "etcd lease keep-alive failed; retrying");
                } else {
                    tracing::debug!(url = %lifetime.url, lease, %error, "etcd lease keep-alive failed again");
                }
                if !backoff.wait(&lifetime.closed).await {
                    return KeepAliveEnd::Replaced;
                }
                continue;
            }
        };
        // Opening the stream renewed the lease once.
        renewed_at = Instant::now();
        backoff.reset();
        if std::mem::take(&mut failing) {
            tracing::info!(url = %lifetime.url, lease, "etcd lease keep-alive works again");
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                changed = lease_rx.changed() => {
                    if changed.is_err() || *lease_rx.borrow_and_update() != Some(lease) {
                        return KeepAliveEnd::Replaced;
                    }
                    continue;
                }
            }
            if stream.keep_alive().await.is_err() {
                break;
            }
            match call(request_timeout, stream.message()).await {
                Ok(Some(response)) if response.ttl > 0 => renewed_at = Instant::now(),
                Ok(Some(_)) => return KeepAliveEnd::Lost,
                Ok(None) => break,
                Err(failure) => {
                    tracing::warn!(url = %lifetime.url, lease, error = %failure.into_source(), "etcd lease keep-alive interrupted");
                    break;
                }
            }
        }
    }
}
