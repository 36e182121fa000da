//! The keeper of a ZooKeeper client's liveness: its session, and the registrations (the
//! ephemeral znodes) that live in it.
//!
//! The client library reconnects by itself within the session. Once the session is lost
//! for good (the library reports it expired, or a request finds it dead and the server
//! confirms), a background task opens a new session as soon as a server answers and
//! creates every registration again, retrying until they hold. A znode still held by the
//! old session (the server has not expired it yet) is replaced in one transaction
//! (delete + create), so it never blocks the new one. While a new session is being opened,
//! requests wait for it (bounded).
//!
//! # Ownership
//! An ephemeral znode belongs to the session that created it (its `ephemeralOwner`).
//! `register` replaces the znode whoever holds it (how a hot upgrade's new generation
//! takes over); nothing else this client does touches a znode another session holds.
//! Each registration records the session that wrote it; a restore replaces a znode only
//! when that session (or the current one) owns it, and `unregister` deletes it only then,
//! at the version it read (a znode changed in between is read again). A znode found
//! under a foreign session is left to it and forgotten here, with one log line.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rpc_core::RegistryError;
use tokio::sync::{Mutex, Notify, watch};
use zookeeper_client::{Client, Error as ZkError};

use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure, bounded};
use crate::zookeeper::config::ZooKeeperConfig;
use crate::zookeeper::error::is_session_lost;
use crate::zookeeper::owned::{Created, Found, create_instance_node, delete_if_owned};

/// The session of one ZooKeeper client and the registrations created in it.
pub(super) struct SessionKeeper {
    /// Its client's URL (for logs and errors), closed token and task tracker.
    lifetime: Arc<ClientLifetime>,
    /// What opening a new session takes, and the bound on each request.
    config: ZooKeeperConfig,
    /// The current session; `None` while a new one is being opened, and after close.
    session: watch::Sender<Option<Client>>,
    /// Told by any request that found the session dead, in case the library cannot say so.
    broken: Notify,
    /// path -> every instance registered through this client.
    registered: Mutex<BTreeMap<String, Registered>>,
    /// Set from the moment the session is found lost until every registration is
    /// created again in a new one.
    restoring: AtomicBool,
}

/// One registration: the znode's data, and the session that wrote it last (whose
/// znode it is, as long as no other session replaced it).
struct Registered {
    data: Vec<u8>,
    session: i64,
}

/// Opens one session (unbounded: callers bound it).
pub(super) async fn open_session(config: &ZooKeeperConfig) -> Result<Client, ZkError> {
    let mut connector = Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_connection_timeout(connection_timeout(config))
        .with_fail_eagerly();
    if let Some((user, password)) = &config.network.credentials {
        connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
    }
    connector.connect(&config.network.endpoints.join(",")).await
}

/// How long the library waits on one server before it tries the next (and, in a session,
/// how long a silent connection is given before it is concluded lost): the library's
/// own default, 2/5 of the session timeout, but no more than the connect timeout shared
/// among the servers — else a server that is silently gone (a partition, a host that
/// vanished) takes the whole connect timeout when it is tried first, and a provider
/// cannot start although the others answer (seen in the lab, tests/tests/lab_cluster.rs:
/// 9 s sessions, so 3.6 s per server, against a 3 s connect timeout).
fn connection_timeout(config: &ZooKeeperConfig) -> Duration {
    let servers = u32::try_from(config.network.endpoints.len().max(1)).unwrap_or(u32::MAX);
    let shared = config.network.connect_timeout / servers;
    (config.session_timeout * 2 / 5)
        .min(shared)
        .max(Duration::from_millis(100))
}

impl SessionKeeper {
    /// A keeper of `session` (just opened), its supervising task started on `lifetime`'s
    /// tracker.
    pub(super) fn start(
        lifetime: Arc<ClientLifetime>,
        config: ZooKeeperConfig,
        session: Client,
    ) -> Arc<Self> {
        let keeper = Arc::new(Self {
            lifetime,
            config,
            session: watch::channel(Some(session)).0,
            broken: Notify::new(),
            registered: Mutex::new(BTreeMap::new()),
            restoring: AtomicBool::new(false),
        });
        keeper
            .lifetime
            .tasks
            .spawn(supervise_sessions(keeper.clone()));
        keeper
    }

    /// Bound on each request, and on waiting for a new session.
    pub(super) fn request_timeout(&self) -> Duration {
        self.config.network.request_timeout
    }

    /// Whether instance znodes are written with credentials (readable by anyone, writable
    /// by their user only).
    fn secured(&self) -> bool {
        self.config.network.credentials.is_some()
    }

    /// Whether the session was lost and the registrations are not all created again in
    /// a new one yet.
    pub(super) fn is_restoring(&self) -> bool {
        self.restoring.load(Ordering::Relaxed)
    }

    /// The sessions as they come: `None` while a new one is being opened, and after close.
    pub(super) fn sessions(&self) -> watch::Receiver<Option<Client>> {
        self.session.subscribe()
    }

    /// The current session, waiting (bounded) while a new one is being opened.
    ///
    /// # Errors
    /// [`RegistryError::Closed`] after close; [`RegistryError::Operation`] of `operation`
    /// when no session comes within the request timeout.
    pub(super) async fn client(&self, operation: &'static str) -> Result<Client, RegistryError> {
        let mut rx = self.session.subscribe();
        let waited = tokio::time::timeout(
            self.config.network.request_timeout,
            rx.wait_for(Option::is_some),
        )
        .await;
        match waited {
            Ok(Ok(session)) => session.clone().ok_or_else(|| self.lifetime.closed_error()),
            Ok(Err(_)) => Err(self.lifetime.closed_error()),
            Err(_) => Err(self.lifetime.failed(
                operation,
                format!(
                    "no ZooKeeper session within {:?} (reconnecting)",
                    self.config.network.request_timeout
                ),
            )),
        }
    }

    /// Tells the supervisor when `failure` shows a dead session.
    pub(super) fn note(&self, failure: &Failure<ZkError>) {
        if let Failure::Failed(error) = failure
            && is_session_lost(error)
        {
            self.report_lost();
        }
    }

    /// Tells the supervisor that the session looks dead (it asks the server, then opens a
    /// new one if so).
    pub(super) fn report_lost(&self) {
        self.broken.notify_one();
    }

    /// Maps a failed request, telling the supervisor when it shows a dead session.
    pub(super) fn failed(
        &self,
        failure: Failure<ZkError>,
        operation: &'static str,
    ) -> RegistryError {
        self.note(&failure);
        failure.into_operation(&self.lifetime.url, operation)
    }

    /// Creates the instance znode `path` holding `data` in the current session, replacing
    /// whatever znode is there (see "Ownership" above), and records it, so that a new
    /// session gets it too.
    ///
    /// # Errors
    /// As [`SessionKeeper::client`]; [`RegistryError::Operation`] when the server fails the
    /// creation or does not answer in time.
    pub(super) async fn register(&self, path: String, data: Vec<u8>) -> Result<(), RegistryError> {
        let request_timeout = self.config.network.request_timeout;
        let client = self.client("register").await?;
        let mut registered = bounded(request_timeout, async {
            Ok::<_, ZkError>(self.registered.lock().await)
        })
        .await
        .map_err(|failure| self.failed(failure, "register"))?;
        let take_over = |_owner| Found::Replace;
        bounded(
            request_timeout,
            create_instance_node(&client, &path, &data, self.secured(), take_over),
        )
        .await
        .map_err(|failure| self.failed(failure, "register"))?;
        let session = client.session_id().0;
        registered.insert(path, Registered { data, session });
        Ok(())
    }

    /// Deletes the instance znode `path` if it was registered through this client and
    /// one of its sessions still owns it; `false` when it was not registered here. A
    /// znode already gone counts as deleted; one another session holds now (a newer
    /// generation's) is left to it.
    ///
    /// # Errors
    /// As [`SessionKeeper::register`].
    pub(super) async fn unregister(&self, path: String) -> Result<bool, RegistryError> {
        let mut registered = self.registered.lock().await;
        let Some(registration) = registered.remove(&path) else {
            return Ok(false);
        };
        let client = self.client("unregister").await?;
        let ours = [registration.session, client.session_id().0];
        let deleted = bounded(
            self.config.network.request_timeout,
            delete_if_owned(&client, &path, &ours),
        )
        .await
        .map_err(|failure| self.failed(failure, "unregister"))?;
        if let Some(owner) = deleted {
            tracing::info!(url = %self.lifetime.url, path, owner = format_args!("{owner:#x}"), "ZooKeeper: another session holds this znode now (a newer generation took it over): not deleted");
        }
        Ok(true)
    }

    /// Forgets the znode `path` without deleting it: another session replaced it (a hot
    /// upgrade's new process, in one transaction), so this session's end no longer
    /// deletes it, and from now on no new session of this client creates it again.
    /// `false` when it was not recorded.
    pub(super) async fn forget(&self, path: &str) -> bool {
        self.registered.lock().await.remove(path).is_some()
    }

    /// Forgets every registration and closes the session, once the client's tasks have
    /// stopped: the server then deletes every ephemeral znode of it at once. Waits (bounded)
    /// until the server confirmed.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] when the server does not confirm within the request
    /// timeout (the znodes then expire with the session).
    pub(super) async fn close(&self) -> Result<(), RegistryError> {
        let request_timeout = self.config.network.request_timeout;
        self.registered.lock().await.clear();
        let Some(client) = self.session.send_replace(None) else {
            return Ok(());
        };
        // Dropping the last handle closes the session.
        let mut state = client.state_watcher();
        let session = client.session_id();
        drop(client);
        let confirmed = tokio::time::timeout(request_timeout, async {
            while !state.state().is_terminated() {
                state.changed().await;
            }
        })
        .await;
        if confirmed.is_err() {
            return Err(self.lifetime.failed(
                "close",
                format!(
                    "the server did not confirm closing session {session} within {request_timeout:?}; its znodes expire with it"
                ),
            ));
        }
        tracing::debug!(url = %self.lifetime.url, %session, "ZooKeeper registry closed");
        Ok(())
    }

    /// Creates every registration in a new session, where the znode is absent or still
    /// held by the session that wrote it; one a foreign session holds (a newer generation
    /// took it over while this client's session was lost) is left to it and forgotten.
    async fn restore(&self, client: &Client) -> Result<usize, ZkError> {
        let mut registered = self.registered.lock().await;
        let current = client.session_id().0;
        let mut foreign = Vec::new();
        for (path, registration) in registered.iter_mut() {
            let writer = registration.session;
            let found = |owner| match owner {
                owner if owner == current => Found::Keep,
                owner if owner == writer => Found::Replace,
                _ => Found::Leave,
            };
            let data = &registration.data;
            match create_instance_node(client, path, data, self.secured(), found).await? {
                Created::Held => registration.session = current,
                Created::Foreign(owner) => foreign.push((path.clone(), owner)),
            }
        }
        for (path, owner) in foreign {
            registered.remove(&path);
            tracing::info!(url = %self.lifetime.url, path, owner = format_args!("{owner:#x}"), "ZooKeeper: another session holds this znode now (a newer generation took it over): left to it, no longer registered here");
        }
        Ok(registered.len())
    }

    /// Waits until `client`'s session is over for good: expired, closed, failed
    /// authentication, or reported dead by a request.
    async fn session_over(&self, client: &Client) {
        let mut state = client.state_watcher();
        if state.state().is_terminated() {
            return;
        }
        loop {
            tokio::select! {
                changed = state.changed() => if changed.is_terminated() { return },
                () = self.broken.notified() => {
                    // A request saw a dead session. The library normally says so itself; if
                    // its session task is gone it cannot: ask the server. While merely
                    // disconnected the library is still reconnecting within the session.
                    match bounded(self.config.network.request_timeout, client.check_stat("/")).await {
                        Err(Failure::Failed(error)) if is_session_lost(&error) => return,
                        _ => {}
                    }
                }
            }
        }
    }
}

/// The session task: whenever the session is over, opens a new one (retrying until a
/// server answers) and creates every registration again (retrying until they hold).
async fn supervise_sessions(keeper: Arc<SessionKeeper>) {
    let cancel = keeper.lifetime.closed.clone();
    let url = &keeper.lifetime.url;
    let network = &keeper.config.network;
    let mut backoff = Backoff::new();
    loop {
        let Some(client) = keeper.session.borrow().clone() else {
            return;
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = keeper.session_over(&client) => {}
        }
        tracing::warn!(%url, session = %client.session_id(), state = %client.state(), "ZooKeeper session lost; opening a new one");
        keeper.restoring.store(true, Ordering::Relaxed);
        keeper.session.send_replace(None);
        drop(client);
        let client = loop {
            let opened = tokio::select! {
                () = cancel.cancelled() => return,
                opened = bounded(network.connect_timeout, open_session(&keeper.config)) => opened,
            };
            match opened {
                Ok(client) => break client,
                Err(failure) => {
                    tracing::debug!(%url, error = %failure.into_source(), "no new ZooKeeper session yet");
                    if !backoff.wait(&cancel).await {
                        return;
                    }
                }
            }
        };
        backoff.reset();
        keeper.session.send_replace(Some(client.clone()));
        let mut attempts = 0_u32;
        loop {
            let restored = tokio::select! {
                () = cancel.cancelled() => return,
                restored = bounded(network.request_timeout, keeper.restore(&client)) => restored,
            };
            attempts += 1;
            match restored {
                Ok(count) => {
                    keeper.restoring.store(false, Ordering::Relaxed);
                    tracing::info!(%url, session = %client.session_id(), registrations = count, attempts, "ZooKeeper session opened; registrations restored");
                    break;
                }
                Err(failure) => {
                    let lost = matches!(&failure, Failure::Failed(error) if is_session_lost(error));
                    let error = failure.into_source();
                    // The first failure is worth a line; the retries until it holds are not.
                    if attempts == 1 {
                        tracing::warn!(%url, %error, "restoring registrations failed; retrying until they hold");
                    } else {
                        tracing::debug!(%url, %error, attempts, "restoring registrations failed again");
                    }
                    // A lost session: the outer loop opens a new one.
                    if lost || !backoff.wait(&cancel).await {
                        break;
                    }
                }
            }
        }
        backoff.reset();
    }
}
