//! The ZooKeeper backend:
//! `zookeeper://[user:pass@]host:port[,host:port...][?session_timeout=10s&root=/rpc]`.
//!
//! # Layout
//! One instance is one *ephemeral* znode holding the instance's JSON:
//! `<root>/<service.path_segment()>/providers/<instance id>`, e.g.
//! `/rpc/helloworld.Greeter:1.0.0/providers/10.0.0.1:50051-1f2e...`. The service's directory
//! carries the interface, then version and group (percent-encoded, slash-free), so services
//! that differ only by group or version never share a directory. The directories are
//! persistent and created on demand (by providers and subscribers, like Dubbo's); the
//! instance id is percent-encoded into a valid node name.
//!
//! # Presence
//! The znodes belong to this client's session (`session_timeout`, default 10 s; the server
//! bounds it to 2..20 ticks). A process that dies stops pinging and the server deletes its
//! znodes when the session expires. The client library reconnects by itself within the
//! session; once the session is lost for good (the library reports it expired), a
//! background task opens a new session as soon as a server answers and creates every
//! registration again. A znode still held by the old session (the server has not expired
//! it yet) is replaced in one transaction (delete + create), so it never blocks the new one.
//!
//! # Subscriptions
//! A subscription lists the providers directory with a one-shot children watch, reads each
//! child, publishes the set, and lists again (re-arming the watch) after every event, and
//! after a new session. Snapshot revisions are the directory's `pzxid`, the zxid of the last
//! child created or deleted, which only increases. While the session is being re-established
//! the consumer keeps the last set.
//!
//! # Parameters
//! `session_timeout` (default 10 s), `root` (default `/rpc`), `connect_timeout` (default 3 s:
//! bound on opening the first session), `request_timeout` (default 3 s: bound on every later
//! request). The port defaults to 2181. `user:pass@` adds `digest` authentication; instance
//! znodes are then writable only by that user and readable by anyone (deleting a child is
//! governed by its directory's ACL, which stays open so that providers of any user can
//! register, as in Dubbo). Credentials never appear in logs or errors.
//!
//! # Panics of the client library
//! `zookeeper-client` panics in a watcher whose session task went away without a final
//! event. Watch waits here are wrapped so that such a panic ends the wait as a lost session
//! (a new session is then opened) instead of unwinding through the subscription.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt;
use futures_util::future::join_all;
use rpc_core::{Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId};
use tokio::sync::{Mutex, Notify, watch};
use tokio_util::sync::CancellationToken;
use zookeeper_client::{Acl, Acls, Client, CreateMode, Error as ZkError, Permission};

use crate::remote::NetworkSettings;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure, bounded};
use crate::remote::snapshots::{SnapshotPublisher, to_revision};
use crate::url::RegistryUrl;

/// Port used when the URL gives none.
pub const DEFAULT_PORT: u16 = 2181;
/// Session timeout when the URL has no `session_timeout`.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Root path when the URL has no `root`.
pub const DEFAULT_ROOT: &str = "/rpc";

/// The query parameters of a `zookeeper://` URL besides [`NetworkSettings::PARAMS`].
const PARAMS: [&str; 2] = ["session_timeout", "root"];

/// Instance znodes of an authenticated client: all rights for its user, read for anyone.
static AUTHENTICATED_NODE_ACLS: [Acl; 2] = [
    Acl::new_const(Permission::ALL, "auth", ""),
    Acl::new_const(Permission::READ, "world", "anyone"),
];

/// Settings of a [`ZooKeeperRegistry`], from its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZooKeeperConfig {
    /// The servers, the credentials (for `digest` authentication) and the time bounds;
    /// `connect_timeout` bounds opening a session, the first and every new one.
    pub network: NetworkSettings,
    /// Requested session timeout: how long after its process dies an instance disappears.
    pub session_timeout: Duration,
    /// Root path, starting with `/`, without a trailing `/`.
    pub root: String,
}

impl ZooKeeperConfig {
    /// Reads the settings of a `zookeeper://` URL.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the fault: an unknown parameter, a
    /// `session_timeout` that does not parse or is zero, a `root` that is not an absolute
    /// path without trailing or double `/`, then those of [`NetworkSettings::from_url`] (a
    /// user without password, no host, a timeout that does not parse or is zero).
    pub fn from_url(url: &RegistryUrl) -> Result<Self, RegistryError> {
        NetworkSettings::expect_params(url, &PARAMS)?;
        let session_timeout = url.duration_param("session_timeout", DEFAULT_SESSION_TIMEOUT)?;
        if session_timeout.is_zero() {
            return Err(url.invalid("parameter `session_timeout` must be greater than zero".into()));
        }
        let root = url.param("root").unwrap_or(DEFAULT_ROOT);
        if !root.starts_with('/') || root.len() < 2 || root.ends_with('/') || root.contains("//") {
            return Err(url.invalid(format!(
                "parameter `root`: `{root}` must be an absolute path like `/rpc` (no trailing or double `/`)"
            )));
        }
        Ok(Self {
            network: NetworkSettings::from_url(url, DEFAULT_PORT, "ZooKeeper digest credentials")?,
            session_timeout,
            root: root.to_owned(),
        })
    }
}

/// A registry client backed by ZooKeeper (see the module documentation).
///
/// Dropping it without [`Registry::close`] ends its session as soon as its background tasks
/// stop, so its instances disappear at once.
pub struct ZooKeeperRegistry {
    shared: Arc<Shared>,
}

struct Shared {
    /// Its URL, subscriptions and background tasks, and whether it was closed.
    core: ClientLifetime,
    config: ZooKeeperConfig,
    /// The current session; `None` while a new one is being opened, and after close.
    session: watch::Sender<Option<Client>>,
    /// Told by any request that found the session dead, in case the library cannot say so.
    broken: Notify,
    /// path -> JSON of every instance registered through this client.
    registered: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl ZooKeeperRegistry {
    /// Opens a session with the ZooKeeper ensemble of `url`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] (see [`ZooKeeperConfig::from_url`]);
    /// [`RegistryError::Unreachable`] when no server grants a session within
    /// `connect_timeout`; [`RegistryError::Operation`] when a server refuses it (e.g. failed
    /// authentication).
    pub async fn connect(url: &RegistryUrl) -> Result<Self, RegistryError> {
        let config = ZooKeeperConfig::from_url(url)?;
        Self::with_config(url.redacted().to_owned(), config).await
    }

    /// Connects with explicit settings; `url` (credentials redacted) names the registry in
    /// logs and errors.
    ///
    /// # Errors
    /// As [`ZooKeeperRegistry::connect`].
    pub async fn with_config(url: String, config: ZooKeeperConfig) -> Result<Self, RegistryError> {
        let client = match bounded(config.network.connect_timeout, open_session(&config)).await {
            Ok(client) => client,
            Err(Failure::Failed(error @ (ZkError::AuthFailed | ZkError::NoAuth))) => {
                return Err(Failure::Failed(error).into_operation(&url, "connect"));
            }
            Err(failure) => {
                return Err(RegistryError::Unreachable {
                    url,
                    timeout: config.network.connect_timeout,
                    source: failure.into_source(),
                });
            }
        };
        tracing::debug!(%url, session = %client.session_id(), "ZooKeeper session opened");
        let shared = Arc::new(Shared {
            core: ClientLifetime::new(url),
            config,
            session: watch::channel(Some(client)).0,
            broken: Notify::new(),
            registered: Mutex::new(BTreeMap::new()),
        });
        shared.core.tasks.spawn(supervise_sessions(shared.clone()));
        Ok(Self { shared })
    }

    /// The path of the directory that holds the instances of `service`.
    pub fn providers_path(&self, service: &ServiceKey) -> String {
        self.shared.providers_path(service)
    }
}

impl fmt::Debug for ZooKeeperRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZooKeeperRegistry")
            .field("url", &self.shared.core.url)
            .finish_non_exhaustive()
    }
}

impl Drop for ZooKeeperRegistry {
    fn drop(&mut self) {
        self.shared.core.closed.cancel();
    }
}

/// Opens one session (unbounded: callers bound it).
async fn open_session(config: &ZooKeeperConfig) -> Result<Client, ZkError> {
    let mut connector = Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_fail_eagerly();
    if let Some((user, password)) = &config.network.credentials {
        connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
    }
    connector.connect(&config.network.endpoints.join(",")).await
}

/// Whether `error` means the session is gone for good (a new one is needed).
/// `UnexpectedError` is what requests get once the library's session task is gone without
/// reporting a terminal state.
fn is_session_lost(error: &ZkError) -> bool {
    matches!(
        error,
        ZkError::SessionExpired
            | ZkError::ClientClosed
            | ZkError::SessionMoved
            | ZkError::AuthFailed
            | ZkError::UnexpectedError(_)
    )
}

/// A node name for an instance id: characters outside `[A-Za-z0-9._:@-]` percent-encoded,
/// so any id gives one valid znode name (never `.`, `..` or containing `/`).
fn node_name(id: &str) -> String {
    let mut name = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'@' | b'-') {
            name.push(byte as char);
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    if name.is_empty() || name.bytes().all(|b| b == b'.') {
        name = name.replace('.', "%2E");
    }
    name
}

impl Shared {
    fn providers_path(&self, service: &ServiceKey) -> String {
        format!("{}/{}/providers", self.config.root, service.path_segment())
    }

    fn instance_path(&self, instance: &Instance) -> String {
        format!(
            "{}/{}",
            self.providers_path(&instance.service),
            node_name(instance.id.as_str())
        )
    }

    fn node_acls(&self) -> Acls<'static> {
        if self.config.network.credentials.is_some() {
            Acls::new(&AUTHENTICATED_NODE_ACLS)
        } else {
            Acls::anyone_all()
        }
    }

    /// The current session, waiting (bounded) while a new one is being opened.
    async fn client(&self, operation: &'static str) -> Result<Client, RegistryError> {
        let mut rx = self.session.subscribe();
        let waited = tokio::time::timeout(
            self.config.network.request_timeout,
            rx.wait_for(Option::is_some),
        )
        .await;
        match waited {
            Ok(Ok(session)) => session.clone().ok_or_else(|| self.core.closed_error()),
            Ok(Err(_)) => Err(self.core.closed_error()),
            Err(_) => Err(self.core.failed(
                operation,
                format!(
                    "no ZooKeeper session within {:?} (reconnecting)",
                    self.config.network.request_timeout
                ),
            )),
        }
    }

    /// Maps a failed request, telling the supervisor when it shows a dead session.
    fn failed(&self, failure: Failure<ZkError>, operation: &'static str) -> RegistryError {
        if let Failure::Failed(error) = &failure
            && is_session_lost(error)
        {
            self.broken.notify_one();
        }
        failure.into_operation(&self.core.url, operation)
    }

    /// Creates the ephemeral znode `path` in `client`'s session, replacing a znode of the
    /// same name left by an older session.
    async fn create_instance_node(
        &self,
        client: &Client,
        path: &str,
        data: &[u8],
    ) -> Result<(), ZkError> {
        let (parent, _) = path.rsplit_once('/').unwrap_or((path, ""));
        let options = CreateMode::Ephemeral.with_acls(self.node_acls());
        let directory = CreateMode::Persistent.with_acls(Acls::anyone_all());
        for _ in 0..3 {
            match client.create(path, data, &options).await {
                Ok(_) => return Ok(()),
                Err(ZkError::NoNode) => client.mkdir(parent, &directory).await?,
                Err(ZkError::NodeExists) => {
                    // Our own earlier registration or a stale node of an expired session:
                    // replace it atomically.
                    let mut writer = client.new_multi_writer();
                    writer.add_delete(path, None)?;
                    writer.add_create(path, data, &options)?;
                    match writer.commit().await {
                        Ok(_) => return Ok(()),
                        Err(error) => match ZkError::from(error) {
                            // Deleted meanwhile: create again.
                            ZkError::NoNode => continue,
                            other => return Err(other),
                        },
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Err(ZkError::UnexpectedError(format!(
            "{path} kept changing while it was created"
        )))
    }

    /// Creates every registration in a new session.
    async fn restore(&self, client: &Client) -> Result<usize, ZkError> {
        let registered = self.registered.lock().await;
        for (path, data) in registered.iter() {
            self.create_instance_node(client, path, data).await?;
        }
        Ok(registered.len())
    }

    /// Lists `directory` with a children watch and reads every child.
    async fn read(
        &self,
        client: &Client,
        directory: &str,
    ) -> Result<(u64, Vec<Instance>, zookeeper_client::OneshotWatcher), ZkError> {
        let (children, stat, watcher) = match client.get_and_watch_children(directory).await {
            Ok(listed) => listed,
            Err(ZkError::NoNode) => {
                // Nobody registered yet: create the directory (as providers would) and list it.
                client
                    .mkdir(
                        directory,
                        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
                    )
                    .await?;
                client.get_and_watch_children(directory).await?
            }
            Err(error) => return Err(error),
        };
        let reads = children.iter().map(|child| {
            let path = format!("{directory}/{child}");
            async move { (client.get_data(&path).await, path) }
        });
        let mut instances = Vec::with_capacity(children.len());
        for (read, path) in join_all(reads).await {
            match read {
                Ok((data, _)) => match serde_json::from_slice::<Instance>(&data) {
                    Ok(instance) => instances.push(instance),
                    Err(error) => {
                        tracing::warn!(url = %self.core.url, %path, %error, "ignoring a znode that is not an instance")
                    }
                },
                // Deleted between the listing and the read: the watch reports it.
                Err(ZkError::NoNode) => {}
                Err(error) => return Err(error),
            }
        }
        Ok((to_revision(stat.pzxid), instances, watcher))
    }
}

/// Waits until `client`'s session is over for good: expired, closed, failed authentication,
/// or reported dead by a request.
async fn session_over(shared: &Shared, client: &Client) {
    let mut state = client.state_watcher();
    if state.state().is_terminated() {
        return;
    }
    loop {
        tokio::select! {
            changed = state.changed() => if changed.is_terminated() { return },
            () = shared.broken.notified() => {
                // A request saw a dead session. The library normally says so itself; if its
                // session task is gone it cannot: ask the server. While merely
                // disconnected the library is still reconnecting within the session.
                match bounded(shared.config.network.request_timeout, client.check_stat("/")).await {
                    Err(Failure::Failed(error)) if is_session_lost(&error) => return,
                    _ => {}
                }
            }
        }
    }
}

/// The session task: whenever the session is over, opens a new one (retrying until a
/// server answers) and creates every registration again.
async fn supervise_sessions(shared: Arc<Shared>) {
    let cancel = shared.core.closed.clone();
    let mut backoff = Backoff::new();
    loop {
        let Some(client) = shared.session.borrow().clone() else {
            return;
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = session_over(&shared, &client) => {}
        }
        tracing::warn!(url = %shared.core.url, session = %client.session_id(), state = %client.state(), "ZooKeeper session lost; opening a new one");
        shared.session.send_replace(None);
        drop(client);
        let client = loop {
            let opened = tokio::select! {
                () = cancel.cancelled() => return,
                opened = bounded(shared.config.network.connect_timeout, open_session(&shared.config)) => opened,
            };
            match opened {
                Ok(client) => break client,
                Err(failure) => {
                    tracing::debug!(url = %shared.core.url, error = %failure.into_source(), "no new ZooKeeper session yet");
                    if !backoff.wait(&cancel).await {
                        return;
                    }
                }
            }
        };
        backoff.reset();
        shared.session.send_replace(Some(client.clone()));
        loop {
            let restored = tokio::select! {
                () = cancel.cancelled() => return,
                restored = bounded(shared.config.network.request_timeout, shared.restore(&client)) => restored,
            };
            match restored {
                Ok(count) => {
                    tracing::info!(url = %shared.core.url, session = %client.session_id(), registrations = count, "ZooKeeper session opened; registrations restored");
                    break;
                }
                Err(failure) => {
                    let lost = matches!(&failure, Failure::Failed(error) if is_session_lost(error));
                    tracing::warn!(url = %shared.core.url, error = %failure.into_source(), "restoring registrations failed; retrying");
                    if lost || !backoff.wait(&cancel).await {
                        break;
                    }
                }
            }
        }
        backoff.reset();
    }
}

/// One subscription's loop: list with a watch, publish, wait for the watch or a new
/// session, list again.
async fn watch_service(
    shared: Arc<Shared>,
    id: SubscriptionId,
    directory: String,
    cancel: CancellationToken,
    mut publisher: SnapshotPublisher,
    mut watcher: Option<zookeeper_client::OneshotWatcher>,
) {
    let mut sessions = shared.session.subscribe();
    let mut backoff = Backoff::new();
    loop {
        // Wait for the armed watch to fire, or the session to change.
        if let Some(armed) = watcher.take() {
            let fired = AssertUnwindSafe(armed.changed()).catch_unwind();
            tokio::select! {
                () = cancel.cancelled() => break,
                () = publisher.closed() => break,
                _ = sessions.changed() => {}
                event = fired => match event {
                    Ok(event) if event.session_state.is_terminated() => shared.broken.notify_one(),
                    Ok(_) => {}
                    Err(_) => {
                        tracing::warn!(url = %shared.core.url, %directory, "the ZooKeeper watcher panicked; treating the session as lost");
                        shared.broken.notify_one();
                    }
                },
            }
        }
        // The current session (waiting while a new one is being opened).
        let client = tokio::select! {
            () = cancel.cancelled() => break,
            () = publisher.closed() => break,
            session = sessions.wait_for(Option::is_some) => match session {
                Ok(session) => session.clone(),
                Err(_) => break,
            },
        };
        let Some(client) = client else { break };
        let read = tokio::select! {
            () = cancel.cancelled() => break,
            read = bounded(shared.config.network.request_timeout, shared.read(&client, &directory)) => read,
        };
        match read {
            Ok((revision, instances, armed)) => {
                publisher.publish(revision, instances);
                watcher = Some(armed);
                backoff.reset();
            }
            Err(failure) => {
                if let Failure::Failed(error) = &failure
                    && is_session_lost(error)
                {
                    shared.broken.notify_one();
                }
                tracing::debug!(url = %shared.core.url, %directory, error = %failure.into_source(), "ZooKeeper read failed; keeping the last known instances");
                if !backoff.wait(&cancel).await {
                    break;
                }
            }
        }
    }
    shared.core.subscriptions.forget(id);
}

#[async_trait]
impl Registry for ZooKeeperRegistry {
    fn url(&self) -> &str {
        &self.shared.core.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.shared.core.check_open()?;
        let shared = &self.shared;
        let path = shared.instance_path(instance);
        let data =
            serde_json::to_vec(instance).map_err(|error| shared.core.failed("register", error))?;
        let client = shared.client("register").await?;
        let mut registered = bounded(shared.config.network.request_timeout, async {
            Ok::<_, ZkError>(shared.registered.lock().await)
        })
        .await
        .map_err(|failure| shared.failed(failure, "register"))?;
        bounded(
            shared.config.network.request_timeout,
            shared.create_instance_node(&client, &path, &data),
        )
        .await
        .map_err(|failure| shared.failed(failure, "register"))?;
        registered.insert(path, data);
        tracing::debug!(url = %shared.core.url, instance = %instance.id, service = %instance.service, "registered in ZooKeeper");
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        self.shared.core.check_open()?;
        let shared = &self.shared;
        let path = shared.instance_path(instance);
        let mut registered = shared.registered.lock().await;
        if registered.remove(&path).is_none() {
            return Ok(());
        }
        let client = shared.client("unregister").await?;
        match bounded(
            shared.config.network.request_timeout,
            client.delete(&path, None),
        )
        .await
        {
            Ok(()) | Err(Failure::Failed(ZkError::NoNode)) => {}
            Err(failure) => return Err(shared.failed(failure, "unregister")),
        }
        tracing::debug!(url = %shared.core.url, instance = %instance.id, service = %instance.service, "unregistered from ZooKeeper");
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        self.shared.core.check_open()?;
        let shared = &self.shared;
        let directory = shared.providers_path(service);
        let client = shared.client("subscribe").await?;
        let (revision, instances, watcher) = bounded(
            shared.config.network.request_timeout,
            shared.read(&client, &directory),
        )
        .await
        .map_err(|failure| shared.failed(failure, "subscribe"))?;
        drop(client);
        let follow = |id, cancel, publisher| {
            watch_service(
                shared.clone(),
                id,
                directory,
                cancel,
                publisher,
                Some(watcher),
            )
        };
        Ok(shared
            .core
            .start_subscription(service, revision, instances, follow))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.shared.core.subscriptions.close(id)
    }

    async fn close(&self) -> Result<(), RegistryError> {
        let shared = &self.shared;
        if shared.core.closed.is_cancelled() {
            return Ok(());
        }
        shared.core.stop();
        // The tasks drop their watchers and their handles on the session as they stop.
        shared
            .core
            .wait_for_tasks(shared.config.network.request_timeout)
            .await;
        shared.registered.lock().await.clear();
        let Some(client) = shared.session.send_replace(None) else {
            return Ok(());
        };
        // Dropping the last handle closes the session; the server then deletes every
        // ephemeral znode of it at once. Wait (bounded) until the server confirmed.
        let mut state = client.state_watcher();
        let session = client.session_id();
        drop(client);
        let confirmed = tokio::time::timeout(shared.config.network.request_timeout, async {
            while !state.state().is_terminated() {
                state.changed().await;
            }
        })
        .await;
        if confirmed.is_err() {
            return Err(shared.core.failed(
                "close",
                format!(
                    "the server did not confirm closing session {session} within {:?}; its znodes expire with it",
                    shared.config.network.request_timeout
                ),
            ));
        }
        tracing::debug!(url = %shared.core.url, %session, "ZooKeeper registry closed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;

    fn config(url: &str) -> Result<ZooKeeperConfig, String> {
        testing::parse(url, ZooKeeperConfig::from_url)
    }

    #[test]
    fn defaults_and_every_parameter() {
        let plain = config("zookeeper://127.0.0.1").unwrap();
        assert_eq!(plain.network.endpoints, ["127.0.0.1:2181"]);
        assert_eq!(plain.session_timeout, DEFAULT_SESSION_TIMEOUT);
        assert_eq!(plain.root, "/rpc");
        assert!(plain.network.credentials.is_none());

        let full = config("zookeeper://u:p@a:1,b?session_timeout=2s&root=/x/y&connect_timeout=1s&request_timeout=500ms")
            .unwrap();
        assert_eq!(full.network.endpoints, ["a:1", "b:2181"]);
        assert_eq!(full.network.credentials, Some(("u".into(), "p".into())));
        assert_eq!(full.session_timeout, Duration::from_secs(2));
        assert_eq!(full.root, "/x/y");
        assert_eq!(full.network.connect_timeout, Duration::from_secs(1));
        assert_eq!(full.network.request_timeout, Duration::from_millis(500));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            config("zookeeper://h?session=2s")
                .unwrap_err()
                .contains("unknown parameter `session`")
        );
        assert!(
            config("zookeeper://h?session_timeout=2")
                .unwrap_err()
                .contains("parameter `session_timeout`")
        );
        assert!(
            config("zookeeper://h?session_timeout=0s")
                .unwrap_err()
                .contains("parameter `session_timeout`")
        );
        for root in ["rpc", "/", "/rpc/", "/a//b"] {
            assert!(
                config(&format!("zookeeper://h?root={root}"))
                    .unwrap_err()
                    .contains("parameter `root`"),
                "{root}"
            );
        }
        assert!(
            config("zookeeper://h?connect_timeout=0ms")
                .unwrap_err()
                .contains("parameter `connect_timeout`")
        );
        assert!(
            config("zookeeper://")
                .unwrap_err()
                .contains("needs at least one host")
        );
        assert!(
            config("zookeeper://user@h")
                .unwrap_err()
                .contains("user:password@")
        );
    }

    #[test]
    fn the_password_is_never_shown() {
        testing::assert_password_hidden(
            ZooKeeperConfig::from_url,
            "zookeeper://root:hunter2@h?root=x",
            "zookeeper://root:hunter2@h",
        );
    }

    #[test]
    fn node_names_are_valid_for_any_id() {
        assert_eq!(node_name("10.0.0.1:80-00ff"), "10.0.0.1:80-00ff");
        assert_eq!(node_name("a/b c%"), "a%2Fb%20c%25");
        assert_eq!(node_name(".."), "%2E%2E");
        assert_eq!(node_name("é"), "%C3%A9");
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_within_the_connect_timeout() {
        testing::assert_unreachable_in_time(
            "zookeeper://root",
            Duration::from_millis(300),
            |url| async move { ZooKeeperRegistry::connect(&url).await },
        )
        .await;
    }
}
