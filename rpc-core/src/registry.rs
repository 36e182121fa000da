//! The `Registry` trait every backend implements, and what a subscription delivers.
//!
//! A registry gives *ephemeral presence*: an instance registered by a process that dies
//! without unregistering disappears by itself (etcd lease, ZooKeeper ephemeral node,
//! Nacos heartbeat). A subscription yields **full snapshots** of one service's instances,
//! never diffs, so a consumer that missed a notification converges with the next one.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::Stream;

use crate::{Instance, ServiceKey};

/// A boxed error from a backend library, kept as the `source` of a [`RegistryError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a subscription delivered a snapshot; it decides what *empty protection* does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotOrigin {
    /// The registry server answered with this exact set. An empty authoritative snapshot
    /// means the last instance really left, and consumers apply it.
    Authoritative,
    /// The backend could not learn the true set (lost session, failed read, a client
    /// library's own cache). Consumers with empty protection on keep their last known
    /// instances when such a snapshot is empty.
    Degraded,
}

/// The full set of instances of one service at one revision.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The service these instances provide.
    pub service: ServiceKey,
    /// Increases with every change the backend sees (etcd revision, ZooKeeper zxid, or
    /// a local counter). A consumer never applies a snapshot whose revision is not
    /// greater than the last one it applied.
    pub revision: u64,
    /// Every known instance, in no particular order.
    pub instances: Arc<[Instance]>,
    /// Whether the set is the registry's answer or a best effort (see [`SnapshotOrigin`]).
    pub origin: SnapshotOrigin,
}

impl Snapshot {
    /// An authoritative snapshot.
    pub fn new(service: ServiceKey, revision: u64, instances: Vec<Instance>) -> Self {
        Self {
            service,
            revision,
            instances: instances.into(),
            origin: SnapshotOrigin::Authoritative,
        }
    }

    /// This snapshot marked as degraded (see [`SnapshotOrigin::Degraded`]).
    pub fn degraded(mut self) -> Self {
        self.origin = SnapshotOrigin::Degraded;
        self
    }
}

/// Identifies one subscription of one registry client, for [`Registry::unsubscribe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriptionId(u64);

impl SubscriptionId {
    /// A process-wide unique id.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for SubscriptionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A live subscription: a stream of full snapshots of one service.
///
/// The first snapshot (possibly empty) arrives as soon as the backend has read the
/// current state; later ones follow every change, in revision order. The stream ends
/// after [`Registry::unsubscribe`] or [`Registry::close`].
pub struct Subscription {
    id: SubscriptionId,
    stream: Pin<Box<dyn Stream<Item = Snapshot> + Send>>,
}

impl Subscription {
    /// Wraps a backend's stream.
    pub fn new(id: SubscriptionId, stream: impl Stream<Item = Snapshot> + Send + 'static) -> Self {
        Self {
            id,
            stream: Box::pin(stream),
        }
    }

    /// The id to pass to [`Registry::unsubscribe`].
    pub fn id(&self) -> SubscriptionId {
        self.id
    }
}

impl Stream for Subscription {
    type Item = Snapshot;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Snapshot>> {
        self.stream.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish()
    }
}

/// Errors a registry returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The URL could not be parsed or names an unknown scheme or parameter.
    #[error("invalid registry URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given, with any password replaced by `***`.
        url: String,
        /// What is wrong with it, naming the part or parameter.
        reason: String,
    },
    /// No connection to the server could be made: it refused it, did not answer within
    /// the connect timeout, or the attempt failed otherwise (`cause` says which).
    #[error("registry {url} {}: {source}", cause.describe(*timeout))]
    Unreachable {
        /// The registry, credentials redacted.
        url: String,
        /// The connect timeout (`connect_timeout`), the longest the attempt could take.
        timeout: Duration,
        /// What happened.
        cause: Unreachability,
        /// The last error seen while trying.
        source: BoxError,
    },
    /// An operation failed at the server or in the client library.
    #[error("registry {url}: {operation} failed: {source}")]
    Operation {
        /// The registry, credentials redacted.
        url: String,
        /// `register`, `unregister`, `subscribe`, ...
        operation: &'static str,
        /// The backend's error.
        source: BoxError,
    },
    /// The registry client was closed; no further operation is possible.
    #[error("registry {url} is closed")]
    Closed {
        /// The registry, credentials redacted.
        url: String,
    },
    /// `unsubscribe` was given an id this client does not know (already unsubscribed).
    #[error("unknown subscription {0}")]
    UnknownSubscription(SubscriptionId),
}

/// What happened to a connection attempt that reached no registry server, so an error
/// says "refused" for a server that is not running and "timed out" only for one that
/// did not answer (a refusal comes back in milliseconds; blaming the timeout sends a
/// reader to look at the network instead of at the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unreachability {
    /// The server's host refused the TCP connection: nothing listens at that address.
    Refused,
    /// No answer within the connect timeout.
    TimedOut,
    /// Another failure (name resolution, reset connection, a protocol error).
    Failed,
}

impl Unreachability {
    /// The cause of a failed attempt whose error is `error`: [`Unreachability::Refused`]
    /// when an `std::io::Error` of kind `ConnectionRefused` is in its `source()` chain,
    /// or when a message in the chain says "connection refused" (some client libraries
    /// keep only the text of the socket error), else [`Unreachability::Failed`].
    pub fn of(error: &(dyn std::error::Error + 'static)) -> Self {
        let mut next = Some(error);
        while let Some(error) = next {
            let io_refused = error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
            let text_refused = error
                .to_string()
                .to_ascii_lowercase()
                .contains("connection refused");
            if io_refused || text_refused {
                return Self::Refused;
            }
            next = error.source();
        }
        Self::Failed
    }

    /// The words of an error message: `refused the connection`, `did not answer within
    /// 3s (connect_timeout)`, `is unreachable`.
    fn describe(self, timeout: Duration) -> String {
        match self {
            Self::Refused => {
                "refused the connection (is the server running at that address?)".to_owned()
            }
            Self::TimedOut => format!("did not answer within {timeout:?} (connect_timeout)"),
            Self::Failed => "is unreachable".to_owned(),
        }
    }
}

/// A service registry client: announces this process's providers and watches others.
///
/// Every method may be called concurrently. Implementations must:
/// - make registrations ephemeral (gone by themselves when this client dies) and renew
///   them after a lost session, without help from the caller, retrying until they hold;
/// - leave alone what another client holds: an entry belongs to the client that wrote
///   it last (`register` takes it over: a hot upgrade's new process), and neither a
///   renewal nor `unregister` nor `close` of an earlier writer takes it back or removes
///   it (each backend's documentation says how its server enforces that);
/// - deliver full snapshots in revision order, starting with the current state, and
///   never deliver an empty [`SnapshotOrigin::Authoritative`] snapshot because of a fault;
/// - bound every network wait (an unreachable server gives
///   [`RegistryError::Unreachable`] saying whether it refused or timed out, never a
///   hang);
/// - never log credentials.
#[async_trait]
pub trait Registry: Send + Sync + 'static {
    /// The registry's URL with credentials redacted, for logs and errors.
    fn url(&self) -> &str;

    /// Announces `instance`. Registering the same instance id again replaces it.
    async fn register(&self, instance: &Instance) -> Result<(), RegistryError>;

    /// Withdraws `instance`. Withdrawing an unknown instance is not an error.
    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError>;

    /// Gives `instance` up *without* withdrawing it: another client (a hot upgrade's
    /// new process) registered the same instance id and holds it now. From here on this
    /// client never touches it again: not when its session or lease is renewed (it is
    /// not written again), not when it unregisters or closes (it is not deleted), and
    /// the end of this client's session or lease must not remove it either (each
    /// backend's documentation says how the new registration has moved it away from
    /// this client). Giving up an unknown instance is not an error.
    ///
    /// Default: nothing to do, for backends whose registrations belong to no session
    /// (a static list).
    async fn release(&self, instance: &Instance) -> Result<(), RegistryError> {
        let _ = instance;
        Ok(())
    }

    /// Watches `service`. An unknown service yields an empty snapshot, then changes.
    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError>;

    /// Ends one subscription; its stream ends.
    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError>;

    /// Withdraws every registration of this client, ends every subscription and releases
    /// every session, lease and watch. Later calls return [`RegistryError::Closed`].
    async fn close(&self) -> Result<(), RegistryError>;

    /// How many entries its subscriptions found and could not use (written by a foreign
    /// peer: a URL that does not parse, a protocol not spoken here, no port), each counted
    /// once and skipped, so that a bad entry never hides the good ones.
    ///
    /// Default: 0, for backends whose entries only this framework writes.
    fn skipped_entries(&self) -> u64 {
        0
    }

    /// Whether this client lost its session, lease or connection and has not yet written
    /// its registrations again: until it has (it retries by itself until they hold),
    /// they may be missing from the registry. Observers show it (the admin endpoint's
    /// `/status`, the `rpc_registrations_pending` metric).
    ///
    /// Default: false, for backends with no session to lose (in-process, static).
    fn reregistering(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's error whose `source()` is the socket error.
    #[derive(Debug)]
    struct Wrapper(std::io::Error);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tcp connect error")
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    fn unreachable(cause: Unreachability, source: BoxError) -> String {
        RegistryError::Unreachable {
            url: "etcd://127.0.0.1:2379".into(),
            timeout: Duration::from_secs(3),
            cause,
            source,
        }
        .to_string()
    }

    /// Issue 15: a refusal is not reported as a timeout, and a timeout names its bound.
    #[test]
    fn errors_say_refused_or_timed_out() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "os error 111");
        let wrapped: BoxError = Box::new(Wrapper(io));
        assert_eq!(Unreachability::of(&*wrapped), Unreachability::Refused);
        let text: BoxError = "tcp connect error: Connection refused (os error 111)".into();
        assert_eq!(Unreachability::of(&*text), Unreachability::Refused);
        let other: BoxError = "dns error".into();
        assert_eq!(Unreachability::of(&*other), Unreachability::Failed);

        let refused = unreachable(Unreachability::Refused, wrapped);
        assert!(refused.contains("refused the connection"), "{refused}");
        assert!(!refused.contains("3s"), "{refused}");
        let timed_out = unreachable(Unreachability::TimedOut, "no answer".into());
        assert!(
            timed_out.contains("did not answer within 3s"),
            "{timed_out}"
        );
    }
}
