//! What lives as long as a network client is open, and what closing it must stop.
//!
//! Every network backend closes the same way: calls fail once it is closed, every
//! subscription ends, no background loop goes on. [`ClientLifetime`] holds what that takes
//! (the token every loop stops on, the live subscriptions, the background tasks) with the
//! redacted URL that names the client in every error, so that the three backends cannot
//! drift apart on these rules. Each backend's pieces (its liveness keeper, its watches)
//! hold the same `Arc<ClientLifetime>`.

use std::future::Future;
use std::time::Duration;

use rpc_core::{BoxError, Instance, RegistryError, ServiceKey, Subscription, SubscriptionId};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::remote::snapshots::{SnapshotPublisher, SubscriptionSet};
use crate::remote::unusable::UnusableEntries;

/// The name, the open/closed state, the subscriptions and the background tasks of one
/// network client. Once `closed` is cancelled (by [`ClientLifetime::stop`] from `close`, or
/// by the client's drop) every call fails with [`RegistryError::Closed`], every
/// subscription ends (its token is a child of `closed`) and no background loop goes on
/// past its next await point.
#[derive(Debug)]
pub struct ClientLifetime {
    /// The URL with its password redacted: names the registry in logs and errors.
    pub(crate) url: String,
    /// Cancelled by [`ClientLifetime::stop`]; parent of every subscription's token, and
    /// what every background loop stops on.
    pub(crate) closed: CancellationToken,
    /// The live subscriptions.
    pub(crate) subscriptions: SubscriptionSet,
    /// The background tasks (watch loops, keep-alive, session or connection supervision).
    pub(crate) tasks: TaskTracker,
    /// The entries its subscriptions skipped.
    pub(crate) unusable: UnusableEntries,
}

impl ClientLifetime {
    /// The lifetime of a client named by `url` (password redacted), open.
    pub(crate) fn new(url: String) -> Self {
        let closed = CancellationToken::new();
        Self {
            url,
            subscriptions: SubscriptionSet::new(closed.clone()),
            closed,
            tasks: TaskTracker::new(),
            unusable: UnusableEntries::default(),
        }
    }

    /// Whether the client was closed (or dropped).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// The error of any call made after the client was closed.
    pub(crate) fn closed_error(&self) -> RegistryError {
        RegistryError::Closed {
            url: self.url.clone(),
        }
    }

    /// [`ClientLifetime::closed_error`] once the client was closed. (Nacos checks its own
    /// `closing` flag instead, set before its withdrawal starts.)
    #[cfg_attr(not(any(feature = "etcd", feature = "zookeeper")), allow(dead_code))]
    pub(crate) fn check_open(&self) -> Result<(), RegistryError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        Ok(())
    }

    /// A [`RegistryError::Operation`] of `operation` on this registry, caused by `source`.
    pub(crate) fn failed(
        &self,
        operation: &'static str,
        source: impl Into<BoxError>,
    ) -> RegistryError {
        RegistryError::Operation {
            url: self.url.clone(),
            operation,
            source: source.into(),
        }
    }

    /// Starts a subscription to `service` whose first set, `instances` at `revision`, the
    /// backend has just read: publishes it at once (so the consumer's first poll has an
    /// answer), then runs `follow(id, token, publisher)` as a background task that publishes
    /// every later set until the token is cancelled or the consumer drops its stream.
    pub(crate) fn start_subscription<F>(
        &self,
        service: &ServiceKey,
        revision: u64,
        instances: Vec<Instance>,
        follow: impl FnOnce(SubscriptionId, CancellationToken, SnapshotPublisher) -> F,
    ) -> Subscription
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (id, cancel) = self.subscriptions.open();
        let (mut publisher, stream) = SnapshotPublisher::new(service.clone());
        publisher.publish(revision, instances);
        self.tasks.spawn(follow(id, cancel, publisher));
        Subscription::new(id, stream)
    }

    /// Marks the client closed, ends every subscription and lets no new task start.
    pub(crate) fn stop(&self) {
        self.closed.cancel();
        self.subscriptions.close_all();
        self.tasks.close();
    }

    /// Waits until the background tasks have ended, at most `bound`: they stop at their next
    /// await point after [`ClientLifetime::stop`], but one stuck in a request must not hold
    /// `close` longer than a request may take.
    pub(crate) async fn wait_for_tasks(&self, bound: Duration) {
        let _ = tokio::time::timeout(bound, self.tasks.wait()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stopped_lifetime_is_closed_and_ends_its_subscriptions() {
        let lifetime = ClientLifetime::new("x://h".into());
        lifetime.check_open().unwrap();
        let (_, subscription) = lifetime.subscriptions.open();
        lifetime.stop();
        assert!(subscription.is_cancelled());
        assert!(lifetime.is_closed());
        assert!(matches!(
            lifetime.check_open(),
            Err(RegistryError::Closed { url }) if url == "x://h"
        ));
        lifetime.wait_for_tasks(Duration::from_secs(1)).await;
    }
}
