//! What the network backends (etcd, ZooKeeper, Nacos) have in common.
//!
//! Each backend's configuration embeds one [`NetworkSettings`]: the servers, the
//! credentials and the two time bounds follow one set of rules, so they are parsed and
//! checked here once. What each backend makes of them (which authentication the
//! credentials enable, what exactly `connect_timeout` covers) is said in its own module,
//! as are its own parameters.
//!
//! Each backend's client also holds one `ClientCore`: the redacted URL that names it, and
//! what closing it must stop (its subscriptions and background tasks), so that every
//! backend follows the same closing rules.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use rpc_core::{BoxError, Instance, RegistryError, ServiceKey, Subscription, SubscriptionId};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::DEFAULT_TIMEOUT;
use crate::snapshots::{SnapshotPublisher, SubscriptionSet};
use crate::url::RegistryUrl;

/// Where a network backend's servers are, how to log in, and how long to wait for them.
#[derive(Clone, PartialEq, Eq)]
pub struct NetworkSettings {
    /// `host:port` of each server, in the URL's order, with the backend's default port
    /// where the URL gives none.
    pub endpoints: Vec<String>,
    /// User name and password, if the URL has them.
    pub credentials: Option<(String, String)>,
    /// Bound on connecting at start-up (parameter `connect_timeout`).
    pub connect_timeout: Duration,
    /// Bound on each later request (parameter `request_timeout`).
    pub request_timeout: Duration,
}

/// By hand rather than derived: the password must never reach a log.
impl fmt::Debug for NetworkSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkSettings")
            .field("endpoints", &self.endpoints)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl NetworkSettings {
    /// The query parameters [`NetworkSettings::from_url`] reads, which every network
    /// backend accepts besides its own.
    pub const PARAMS: [&'static str; 2] = ["connect_timeout", "request_timeout"];

    /// Checks that every query parameter of `url` is one of `own` (the backend's) or of
    /// [`NetworkSettings::PARAMS`]. Backends call it before reading anything, so that a
    /// misspelt parameter is the first fault reported.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the first unknown parameter and the known ones,
    /// the backend's first.
    pub(crate) fn expect_params(url: &RegistryUrl, own: &[&str]) -> Result<(), RegistryError> {
        url.expect_params(&[own, &Self::PARAMS[..]].concat())
    }

    /// Reads the servers, credentials and time bounds of a network backend's URL.
    /// `default_port` is the backend's; `credentials` names what the credentials are for
    /// in the error about a user without password (e.g. `etcd credentials`).
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault, checked in this order: a user
    /// without password, no host, a timeout that does not parse or is zero.
    pub fn from_url(
        url: &RegistryUrl,
        default_port: u16,
        credentials: &str,
    ) -> Result<Self, RegistryError> {
        let credentials = match (url.username(), url.password()) {
            (None, _) => None,
            (Some(user), Some(password)) => Some((user.to_owned(), password.to_owned())),
            (Some(_), None) => {
                return Err(url.invalid(format!("{credentials} need `user:password@`")));
            }
        };
        Ok(Self {
            endpoints: url.endpoints(default_port)?,
            credentials,
            connect_timeout: timeout_param(url, "connect_timeout")?,
            request_timeout: timeout_param(url, "request_timeout")?,
        })
    }
}

/// The duration parameter `name` of `url` (default [`DEFAULT_TIMEOUT`]), which must not be
/// zero: a zero bound would give up every request at once.
fn timeout_param(url: &RegistryUrl, name: &str) -> Result<Duration, RegistryError> {
    let value = url.duration_param(name, DEFAULT_TIMEOUT)?;
    if value.is_zero() {
        return Err(url.invalid(format!("parameter `{name}` must be greater than zero")));
    }
    Ok(value)
}

/// The part of a network client that every backend keeps alike. Once `closed` is cancelled
/// (by [`ClientCore::stop`] from `close`, or by the client's drop) every call fails with
/// [`RegistryError::Closed`], every subscription ends (its token is a child of `closed`)
/// and no background loop goes on past its next await point.
#[derive(Debug)]
pub(crate) struct ClientCore {
    /// The URL with its password redacted: names the registry in logs and errors.
    pub(crate) url: String,
    /// Cancelled by [`ClientCore::stop`]; parent of every subscription's token, and what
    /// every background loop stops on.
    pub(crate) closed: CancellationToken,
    /// The live subscriptions.
    pub(crate) subscriptions: SubscriptionSet,
    /// The background tasks (watch loops, keep-alive, session or connection supervision).
    pub(crate) tasks: TaskTracker,
}

impl ClientCore {
    /// The core of a client named by `url` (password redacted), open.
    pub(crate) fn new(url: String) -> Self {
        let closed = CancellationToken::new();
        Self {
            url,
            subscriptions: SubscriptionSet::new(closed.clone()),
            closed,
            tasks: TaskTracker::new(),
        }
    }

    /// The error of any call made after the client was closed.
    pub(crate) fn closed_error(&self) -> RegistryError {
        RegistryError::Closed {
            url: self.url.clone(),
        }
    }

    /// [`ClientCore::closed_error`] once the client was closed. (Nacos checks its own
    /// `closing` flag instead, set before its withdrawal starts.)
    #[cfg_attr(not(any(feature = "etcd", feature = "zookeeper")), allow(dead_code))]
    pub(crate) fn check_open(&self) -> Result<(), RegistryError> {
        if self.closed.is_cancelled() {
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
    /// await point after [`ClientCore::stop`], but one stuck in a request must not hold
    /// `close` longer than a request may take.
    pub(crate) async fn wait_for_tasks(&self, bound: Duration) {
        let _ = tokio::time::timeout(bound, self.tasks.wait()).await;
    }
}

/// Checks every network backend's unit tests make alike, written once so that the three
/// backends are held to the same standard.
#[cfg(test)]
pub(crate) mod testing {
    use std::fmt;
    use std::future::Future;
    use std::time::{Duration, Instant};

    use rpc_core::RegistryError;

    use crate::url::RegistryUrl;

    /// The password every helper here puts in URLs, and looks for where it must not be.
    const PASSWORD: &str = "hunter2";

    /// What `from_url` reads from `url`, or the text of its error (or of the URL's).
    pub(crate) fn parse<T>(
        url: &str,
        from_url: impl FnOnce(&RegistryUrl) -> Result<T, RegistryError>,
    ) -> Result<T, String> {
        let url = RegistryUrl::parse(url).map_err(|e| e.to_string())?;
        from_url(&url).map_err(|e| e.to_string())
    }

    /// Asserts that the password `hunter2` shows neither in the error `from_url` gives for
    /// `bad` nor in the `Debug` of what it reads from `good`.
    pub(crate) fn assert_password_hidden<T: fmt::Debug>(
        from_url: impl Fn(&RegistryUrl) -> Result<T, RegistryError>,
        bad: &str,
        good: &str,
    ) {
        let error = parse(bad, &from_url).unwrap_err();
        assert!(!error.contains(PASSWORD), "{error}");
        let debug = format!("{:?}", parse(good, &from_url).unwrap());
        assert!(!debug.contains(PASSWORD), "{debug}");
    }

    /// Asserts that `connect`, given `<scheme_and_user>:hunter2@127.0.0.1:<a port nothing
    /// listens on>?connect_timeout=<timeout>`, fails as unreachable within that timeout
    /// (well under 5 s), with an error that names the timeout and not the password.
    pub(crate) async fn assert_unreachable_in_time<R, F>(
        scheme_and_user: &str,
        timeout: Duration,
        connect: impl FnOnce(RegistryUrl) -> F,
    ) where
        F: Future<Output = Result<R, RegistryError>>,
    {
        let port = closed_port();
        let url = RegistryUrl::parse(&format!(
            "{scheme_and_user}:{PASSWORD}@127.0.0.1:{port}?connect_timeout={timeout:?}"
        ))
        .unwrap();
        let started = Instant::now();
        let Err(error) = connect(url).await else {
            panic!("connected to a closed port");
        };
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        assert!(
            matches!(error, RegistryError::Unreachable { timeout: bound, .. } if bound == timeout),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains(&format!("{timeout:?}")) && !message.contains(PASSWORD),
            "{message}"
        );
    }

    /// A loopback port nothing listens on (bound, then released).
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> Result<NetworkSettings, String> {
        let url = RegistryUrl::parse(url).map_err(|e| e.to_string())?;
        NetworkSettings::expect_params(&url, &["own"]).map_err(|e| e.to_string())?;
        NetworkSettings::from_url(&url, 7, "test credentials").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = settings("x://h").unwrap();
        assert_eq!(plain.endpoints, ["h:7"]);
        assert!(plain.credentials.is_none());
        assert_eq!(plain.connect_timeout, DEFAULT_TIMEOUT);
        assert_eq!(plain.request_timeout, DEFAULT_TIMEOUT);

        let full = settings("x://u:p@a:1,b?own=1&connect_timeout=1s&request_timeout=2s").unwrap();
        assert_eq!(full.endpoints, ["a:1", "b:7"]);
        assert_eq!(full.credentials, Some(("u".into(), "p".into())));
        assert_eq!(full.connect_timeout, Duration::from_secs(1));
        assert_eq!(full.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn faults_are_named_in_order() {
        let unknown = settings("x://h?bogus=1").unwrap_err();
        assert!(
            unknown.contains("(known: own, connect_timeout, request_timeout)"),
            "{unknown}"
        );
        assert!(
            settings("x://user@?connect_timeout=0s")
                .unwrap_err()
                .contains("test credentials need `user:password@`")
        );
        assert!(
            settings("x://?connect_timeout=0s")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            settings("x://h?connect_timeout=0s&request_timeout=0s")
                .unwrap_err()
                .contains("parameter `connect_timeout` must be greater than zero")
        );
        assert!(
            settings("x://h?request_timeout=soon")
                .unwrap_err()
                .contains("parameter `request_timeout`")
        );
    }

    #[tokio::test]
    async fn a_stopped_core_is_closed_and_ends_its_subscriptions() {
        let core = ClientCore::new("x://h".into());
        core.check_open().unwrap();
        let (_, subscription) = core.subscriptions.open();
        core.stop();
        assert!(subscription.is_cancelled());
        assert!(matches!(
            core.check_open(),
            Err(RegistryError::Closed { url }) if url == "x://h"
        ));
        core.wait_for_tasks(Duration::from_secs(1)).await;
    }

    #[test]
    fn debug_hides_the_password() {
        let debug = format!("{:?}", settings("x://root:hunter2@h").unwrap());
        assert!(
            !debug.contains("hunter2") && debug.contains("root"),
            "{debug}"
        );
    }
}
