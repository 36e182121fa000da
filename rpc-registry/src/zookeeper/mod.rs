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
//! registration again, retrying (100 ms doubling to 1 s) until they hold;
//! [`Registry::reregistering`](rpc_core::Registry::reregistering) is true meanwhile. A
//! znode still held by the old session (the server has not expired it yet) is replaced
//! in one transaction (delete + create), so it never blocks the new one.
//!
//! # Ownership: a znode belongs to the session that created it
//! Only `register` replaces a znode whoever holds it. Everything else reads the znode's
//! `Stat` first and acts only on a znode one of this client's sessions owns (its
//! `ephemeralOwner`: the session that wrote the registration, or the current one), at
//! the version read, so that a change in between is seen (`owned.rs`): a restore after
//! a lost session replaces only such a znode, and `unregister` deletes only such a
//! znode. A znode another session owns belongs to another client (a newer generation):
//! it is left alone and forgotten here, with one log line. Closing the session deletes
//! only the znodes it owns.
//!
//! # Hot upgrade: how ownership moves
//! The hot upgrade's new process registers the same instance (same id, so the same
//! path) before it reports ready: its create finds the old process's znode and replaces
//! it in one transaction (delete at the version read + create), so a watcher never lists
//! the directory without it, and from then on the znode belongs to the new session. The
//! old process then [releases](rpc_core::Registry::release) it (forgets it without
//! deleting) and closes: the end of its session deletes nothing of the new process's.
//! Should the old process lose its session during the hand-over (paused past the session
//! timeout), its restore finds the znode under the new session and leaves it there;
//! should the upgrade fail instead, the old process registers again and takes the znode
//! back before the killed new process's session expires.
//!
//! In Dubbo's format (`registries.<name>.format: dubbo`, see [`crate::dubbo`]) the root
//! defaults to `/dubbo`, the directory is the interface's (`/dubbo/helloworld.Greeter/providers`,
//! shared by every version and group), and the znode's name is the provider's Dubbo URL,
//! URL-encoded; its data is the same URL. A hot upgrade's new process writes a URL with
//! its own `timestamp`, so a second znode for the same instance id: the old one goes when
//! the old process's session ends, and consumers see the same address all along.
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
//! # Files
//! `config.rs` (the URL's parameters), `session.rs` (the session and the registrations in
//! it: presence), `owned.rs` (znodes written and deleted by their owner only), `watch.rs`
//! (one subscription's list-and-watch loop, and why its waits catch the library's
//! panics), `codec.rs` (paths, node modes, data), `error.rs` (what the library's errors
//! mean); this file connects and answers the [`Registry`](rpc_core::Registry) calls with
//! them.

mod codec;
mod config;
mod error;
mod owned;
mod session;
mod watch;

use std::sync::Arc;

use async_trait::async_trait;
use rpc_core::{Instance, RegistryError, ServiceKey, Subscription};

use crate::remote::lifetime::ClientLifetime;
use crate::remote::probe::refine_unreachable;
use crate::remote::retry::bounded;
use crate::remote::{RemoteBackend, RemoteRegistry};
use crate::url::RegistryUrl;
use codec::NodeLayout;
use error::is_refused;
use session::{SessionKeeper, open_session};
use watch::ServiceWatch;

pub use config::{DEFAULT_PORT, DEFAULT_ROOT, DEFAULT_SESSION_TIMEOUT, ZooKeeperConfig};

/// A registry client backed by ZooKeeper (see the module documentation).
///
/// Dropping it without [`Registry::close`](rpc_core::Registry::close) ends its session as
/// soon as its background tasks stop, so its instances disappear at once.
pub type ZooKeeperRegistry = RemoteRegistry<ZooKeeperBackend>;

/// What the ZooKeeper client does under the shared skeleton ([`RemoteRegistry`]): its
/// node layout and session.
pub struct ZooKeeperBackend {
    layout: NodeLayout,
    /// The session and the registrations in it.
    session: Arc<SessionKeeper>,
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
        let timeout = config.network.connect_timeout;
        let client = match bounded(timeout, open_session(&config)).await {
            Ok(client) => client,
            Err(failure) => {
                // zookeeper-client says only `NoHosts`: ask the sockets why.
                let error = failure.into_connect_error(&url, timeout, is_refused);
                return Err(refine_unreachable(error, &config.network.endpoints).await);
            }
        };
        tracing::debug!(%url, session = %client.session_id(), "ZooKeeper session opened");
        let lifetime = Arc::new(ClientLifetime::new(url));
        let layout = NodeLayout::new(config.root.clone(), config.format);
        let session = SessionKeeper::start(lifetime.clone(), config, client);
        Ok(RemoteRegistry::new(
            lifetime,
            ZooKeeperBackend { layout, session },
        ))
    }

    /// The path of the directory that holds the instances of `service`.
    pub fn providers_path(&self, service: &ServiceKey) -> String {
        self.backend().layout.providers_path(service)
    }
}

#[async_trait]
impl RemoteBackend for ZooKeeperBackend {
    const CLIENT: &'static str = "ZooKeeperRegistry";
    const NAME: &'static str = "ZooKeeper";

    async fn register(
        &self,
        lifetime: &ClientLifetime,
        instance: &Instance,
    ) -> Result<(), RegistryError> {
        let path = self.layout.instance_path(instance);
        let data = self
            .layout
            .encode(instance)
            .map_err(|error| lifetime.failed("register", error))?;
        self.session.register(path, data).await
    }

    async fn unregister(&self, instance: &Instance) -> Result<bool, RegistryError> {
        self.session
            .unregister(self.layout.instance_path(instance))
            .await
    }

    /// The new process's registration replaced the ephemeral znode in one transaction
    /// (delete + create, see "Hot upgrade" above): it belongs to the new session, and
    /// the end of this one no longer deletes it. All that is left is to stop creating it
    /// here again.
    async fn release(&self, instance: &Instance) -> Result<bool, RegistryError> {
        Ok(self
            .session
            .forget(&self.layout.instance_path(instance))
            .await)
    }

    fn reregistering(&self) -> bool {
        self.session.is_restoring()
    }

    async fn subscribe(
        &self,
        lifetime: &Arc<ClientLifetime>,
        service: &ServiceKey,
    ) -> Result<Subscription, RegistryError> {
        let watch = ServiceWatch::new(
            lifetime.clone(),
            self.session.clone(),
            self.layout.clone(),
            service.clone(),
        );
        let client = self.session.client("subscribe").await?;
        let (revision, instances, watcher) =
            bounded(self.session.request_timeout(), watch.read(&client))
                .await
                .map_err(|failure| self.session.failed(failure, "subscribe"))?;
        drop(client);
        let follow = |id, cancel, publisher| watch.run(id, cancel, publisher, Some(watcher));
        Ok(lifetime.start_subscription(service, revision, instances, follow))
    }

    async fn close(&self, lifetime: &ClientLifetime) -> Result<(), RegistryError> {
        if lifetime.is_closed() {
            return Ok(());
        }
        lifetime.stop();
        // The tasks drop their watchers and their handles on the session as they stop.
        lifetime
            .wait_for_tasks(self.session.request_timeout())
            .await;
        // Closing the session deletes every instance znode of this client at once.
        self.session.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_closed_port_is_unreachable_within_the_connect_timeout() {
        testing::assert_unreachable_in_time(
            "zookeeper://root",
            Duration::from_millis(300),
            |url| async move { ZooKeeperRegistry::connect(&url).await },
        )
        .await;
    }
}
