//! The Nacos backend:
//! `nacos://[user:pass@]host:port[,host:port...][?namespace=public&group=DEFAULT_GROUP&cluster=DEFAULT]`.
//!
//! # Layout
//! A service is the Nacos service named [`service_name`] (`service.path_segment()`: the
//! interface, then `:version` and `@group` when set) in the URL's `namespace` and `group`.
//! An instance is an *ephemeral* Nacos instance at its host and port, in the URL's
//! `cluster`, with its weight, its metadata, and its whole JSON under the metadata key
//! [`INSTANCE_METADATA_KEY`], so that it comes back with every field. Instances written by
//! other clients (no such key) are read from Nacos' own fields.
//!
//! In Dubbo's format (`registries.<name>.format: dubbo`, see [`crate::dubbo`]) the service
//! is `providers:<interface>:<version>:<group>` and an instance's metadata is its provider
//! URL's parameters with `protocol` and `path` beside them, as Dubbo's Nacos registry
//! writes them; a subscription takes that service's entries over `tri` or `grpc`, and
//! skips the others with one log line each (counted). Version and group wildcards (`*`)
//! are not looked up in this format: a subscription names one service.
//!
//! Nacos identifies an instance by service, cluster, IP and port: two instances of one
//! service at the same address are one instance to Nacos.
//!
//! # Presence
//! nacos-sdk registers over its gRPC connection; the server drops a connection's instances
//! when the connection closes (a process that dies) or stops answering its health checks.
//! After a reconnection the SDK registers everything again by itself, but it notices a
//! broken connection only when a request needs it (its own health check runs every 5 s,
//! then it waits 2 s, 4 s, ... before reconnecting), and re-registers on a 3 s tick. So
//! while this client has registrations or subscriptions, a probe (one small request every
//! [`PROBE_INTERVAL`]) keeps the SDK trying; when a probe succeeds after a failure (or
//! after waiting longer than the interval: it waited for a reconnection), every
//! registration is written again and every subscription reads again at once.
//! [`Registry::reregistering`](rpc_core::Registry::reregistering) is true from a probe
//! that finds the connection silent until then.
//!
//! # Several servers (a Nacos cluster)
//! nacos-sdk starts at a random server of the URL's list and does not leave a bad one
//! within our bounds (no connect timeout on a silent server; retries on a refusing one),
//! and notices a silent server only after its health checks (about 15 s) — as late as
//! the cluster drops the instances of a silent member's clients (15 s). So: at start,
//! only the servers whose gRPC port accepts a connection (tried at once, for a third of
//! `connect_timeout`) are handed to the SDK; and when a probe fails while some servers
//! no longer accept, the client starts a new SDK connection on the others, registers
//! everything through it (the instances become the new connection's) and subscribes again
//! there; the old connection is kept, and asked at every probe to deregister what it
//! held until it has (its own retries would write those again when its server answers),
//! after which the instances still wanted are written again through the new one (see
//! `servers.rs`, `presence.rs`, `retired.rs`); a close that finds it still holding some
//! asks it again in the background for up to a minute (logged). One failover at a time:
//! while a replaced connection's server stays silent, no second failover happens, and
//! the SDK's own checks are the fallback. A server left out
//! of a connection is logged; a later failover tries every server again. A server that
//! hangs but still accepts TCP connections is not detected this way (the SDK's health
//! checks leave it after about 15 s).
//!
//! # Ownership: an instance belongs to the connection that wrote it last
//! Nacos identifies an instance by its address, and an ephemeral instance belongs to the
//! connection that registered it. The server, not this client, makes deletes
//! conditional on that owner: rnacos refuses to delete an ephemeral instance through
//! another connection than the one that wrote it last (`remove_instance` compares the
//! connection id), and Nacos 2 keeps one publication per connection, removing only the
//! sender's. Nacos has no conditional *write*: a registration from any connection
//! takes the instance. So what this client must never do is write an instance again
//! once another connection holds it, and nacos-sdk 0.8 writes on its own: its redo task
//! registers every instance again after each reconnection, and only a deregistration the
//! server answered removes that task (`withdrawals.rs`). Hence:
//! - `unregister` and `release` both send a deregistration through this connection, owed
//!   until the server answers it (sent again at every probe, at close, then in the
//!   background for a while): it ends the SDK's redo task, and the server applies it to
//!   this connection's own registration only;
//! - the probe and a failover write again only what is registered (not what was
//!   unregistered or released).
//!
//! What nacos-sdk 0.8 cannot do, and what that leaves: it has no conditional write and
//! no way to drop a redo task but a deregistration the server answers (nor to close a
//! `NamingService`; its config client's `shutdown` was proposed in nacos-sdk-rust PR #300
//! and withdrawn; the redo mechanism is nacos-sdk-rust #59 / PR #62, and the same race
//! in the Java client is alibaba/nacos #9816). So a client whose instance another
//! connection took over *before* it released it, and whose connection drops and comes
//! back meanwhile, has it written again by the SDK's redo task and owns it again: the
//! registry conformance rule about a lost session run against the other backends
//! (`an_old_generation_that_lost_its_session_does_not_take_back_its_successors_entry`)
//! cannot hold for Nacos, and is not run for it. After `release`, the conformance suite
//! shows that a reconnection of the old client does not take the instance back.
//!
//! # Hot upgrade: how ownership moves
//! Measured against rnacos (tests/tests/upgrade_registry.rs and an exploration of both
//! sequences): when a second connection (the hot upgrade's new process) registers the
//! same address, the instance stays listed as it was (the first registration's data; no
//! change is published) and from then on belongs to the *new* connection: the old
//! connection's close no longer removes it, nor does an explicit deregistration from the
//! old connection, while the new connection's close does, at once. The old process then
//! [releases](rpc_core::Registry::release) the instance (forgets it, and ends the SDK's
//! redo task with a deregistration the server applies to the old connection's own
//! registration) and closes its connection; a watcher sees the instance throughout.
//!
//! # Subscriptions
//! A subscription reads the service from the server, then reads it again each time the
//! SDK's push listener reports a change (several reports during one read cause one more
//! read). Every snapshot is therefore the server's own answer, in the order the reads were
//! made; no server revision exists, so revisions come from a counter of this client. The
//! SDK's *push-empty protection* is turned off, so the removal of a service's last
//! instance arrives, as an authoritative empty snapshot; a failed read delivers nothing
//! (the consumer keeps its last set) and is retried. rnacos batches pushes (about 500 ms),
//! so changes reach subscribers 0.5 to 1 s after they happen.
//!
//! # Parameters
//! `namespace` (default `public`), `group` (default `DEFAULT_GROUP`), `cluster` (default
//! `DEFAULT`: the cluster instances register in; subscribers see every cluster),
//! `grpc_port` (default: the HTTP port + 1000, the Nacos convention), `connect_timeout`
//! (default 3 s), `request_timeout` (default 3 s). The port defaults to 8848. `user:pass@`
//! logs in through the HTTP API (see the `login` module); credentials never appear in logs or errors.
//!
//! # The SDK's own state
//! The SDK keeps a disk cache; it is put in a temporary directory removed with the client
//! (never `$HOME/nacos`). Its connection lives until the last request it retries is done:
//! `close` (and dropping the client) withdraws every registration and subscription so that
//! nothing keeps it. A registration that times out stays queued in the SDK, which
//! applies it when the server returns; an unregistration that fails is not retried by
//! the SDK (and its redo task would write the instance again after a reconnection), so
//! this client sends it again until the server answers (`withdrawals.rs`).
//!
//! # Files
//! `config.rs` (the URL's parameters), `connection.rs` (the SDK's connection and the
//! registrations written through it), `withdrawals.rs` (deregistrations owed until the
//! server answers), `presence.rs` (the probe), `failover.rs` (the move to another
//! server), `sdk.rs` (starting one SDK connection), `servers.rs` (the servers
//! it is given), `watch.rs` (one
//! subscription's read-on-change loop and the SDK listeners they share), `codec.rs` (an
//! instance and a Nacos instance), `error.rs` (what the SDK's errors mean), `login.rs` (the
//! HTTP login); this file connects and answers the [`Registry`](rpc_core::Registry) calls with them.

mod codec;
mod config;
mod connection;
mod dubbo_codec;
mod error;
mod failover;
mod layout;
mod login;
mod presence;
mod retired;
mod sdk;
mod servers;
mod watch;
mod withdrawals;

use std::sync::Arc;

use async_trait::async_trait;
use rpc_core::{Instance, RegistryError, ServiceKey, Subscription};

use crate::remote::lifetime::ClientLifetime;
use crate::remote::{RemoteBackend, RemoteRegistry};
use crate::url::RegistryUrl;
use connection::ConnectionKeeper;
use layout::NacosLayout;
use watch::{GroupWatch, ServiceWatch};

pub use codec::{INSTANCE_METADATA_KEY, service_name};
pub use config::{DEFAULT_CLUSTER, DEFAULT_GROUP, DEFAULT_NAMESPACE, DEFAULT_PORT, NacosConfig};
pub use presence::PROBE_INTERVAL;

/// A registry client backed by Nacos through nacos-sdk (see the module documentation).
///
/// Dropping it without [`Registry::close`](rpc_core::Registry::close) starts the same
/// withdrawal in the background (on the current tokio runtime, if any).
pub type NacosRegistry = RemoteRegistry<NacosBackend>;

/// What the Nacos client does under the shared skeleton ([`RemoteRegistry`]): the SDK's
/// connection, the subscriptions' reads and listeners, the cluster it registers in.
pub struct NacosBackend {
    /// The SDK's connection and the registrations written through it.
    connection: Arc<ConnectionKeeper>,
    /// Reads and change listeners of the subscriptions.
    group: Arc<GroupWatch>,
    /// Cluster this client's instances register in.
    cluster: String,
    /// Our layout or Dubbo's.
    layout: NacosLayout,
}

impl NacosRegistry {
    /// Connects to the Nacos servers of `url` (and logs in when it has credentials).
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] (see [`NacosConfig::from_url`]);
    /// [`RegistryError::Unreachable`] when no server answers within `connect_timeout`;
    /// [`RegistryError::Operation`] when the server refuses a request (e.g. bad
    /// credentials) or the SDK cannot start.
    pub async fn connect(url: &RegistryUrl) -> Result<Self, RegistryError> {
        let config = NacosConfig::from_url(url)?;
        Self::with_config(url.redacted().to_owned(), config).await
    }

    /// Connects with explicit settings; `url` (credentials redacted) names the registry in
    /// logs and errors.
    ///
    /// # Errors
    /// As [`NacosRegistry::connect`].
    pub async fn with_config(url: String, config: NacosConfig) -> Result<Self, RegistryError> {
        let lifetime = Arc::new(ClientLifetime::new(url));
        let connection = ConnectionKeeper::connect(lifetime.clone(), &config).await?;
        let naming = connection.naming()?;
        lifetime
            .tasks
            .spawn(presence::probe(Arc::downgrade(&connection), naming));
        let layout = NacosLayout::new(config.format);
        let group = GroupWatch::new(
            lifetime.clone(),
            config.group,
            config.network.request_timeout,
            layout,
        );
        let backend = NacosBackend {
            connection,
            group: Arc::new(group),
            cluster: config.cluster,
            layout,
        };
        Ok(RemoteRegistry::new(lifetime, backend))
    }
}

/// Ends every subscription and withdraws every registration and SDK subscription, so that
/// nothing keeps the SDK's connection; idempotent. (A function of the parts rather than a
/// method, so that `Drop` can run it on clones of them.)
///
/// # Errors
/// The first deregistration that failed.
async fn withdraw(
    lifetime: &ClientLifetime,
    connection: &Arc<ConnectionKeeper>,
    group: &GroupWatch,
) -> Result<(), RegistryError> {
    if !connection.start_closing() {
        return Ok(());
    }
    lifetime.stop();
    // Each subscription gives back its SDK subscription as it stops.
    lifetime
        .wait_for_tasks(connection.request_timeout() * 2)
        .await;
    let Some(naming) = connection.take_naming() else {
        return Ok(());
    };
    let deregistered = connection.deregister_all(&naming).await;
    // Connections a failover replaced let go of what they still hold, if they answer,
    // and deregistrations not confirmed are owed still; if so, they are asked again in
    // the background for a while.
    let retired = connection.withdraw_retired().await;
    if !retired || deregistered.is_err() {
        tracing::warn!(url = %lifetime.url, "a closed Nacos client still holds instances (a deregistration was not confirmed, or a connection a failover replaced did not answer); asking again in the background");
        connection.withdraw_after_close(Some(naming.clone()));
    }
    group.unlisten_all(&naming).await;
    tracing::debug!(url = %lifetime.url, "Nacos registry closed");
    deregistered
}

#[async_trait]
impl RemoteBackend for NacosBackend {
    const CLIENT: &'static str = "NacosRegistry";
    const NAME: &'static str = "Nacos";

    async fn register(
        &self,
        lifetime: &ClientLifetime,
        instance: &Instance,
    ) -> Result<(), RegistryError> {
        let name = self.layout.service_name(&instance.service);
        let nacos = self
            .layout
            .to_nacos(instance, &name, &self.cluster)
            .map_err(|error| lifetime.failed("register", error))?;
        self.connection.register(&instance.id, name, nacos).await
    }

    async fn unregister(&self, instance: &Instance) -> Result<bool, RegistryError> {
        let name = self.layout.service_name(&instance.service);
        self.connection.unregister(&instance.id, &name).await
    }

    /// See "Hot upgrade" above: the instance stays registered through the new process's
    /// connection; this client only stops writing and deregistering it.
    async fn release(&self, instance: &Instance) -> Result<bool, RegistryError> {
        let name = self.layout.service_name(&instance.service);
        Ok(self.connection.release(&instance.id, &name).await)
    }

    fn reregistering(&self) -> bool {
        self.connection.is_reregistering()
    }

    async fn subscribe(
        &self,
        lifetime: &Arc<ClientLifetime>,
        service: &ServiceKey,
    ) -> Result<Subscription, RegistryError> {
        let (watch, first) =
            ServiceWatch::open(self.group.clone(), self.connection.clone(), service.clone())
                .await?;
        let follow = |id, cancel, publisher| watch.run(id, cancel, publisher);
        Ok(lifetime.start_subscription(service, self.group.next_revision(), first, follow))
    }

    async fn close(&self, lifetime: &ClientLifetime) -> Result<(), RegistryError> {
        withdraw(lifetime, &self.connection, &self.group).await
    }

    /// The SDK's connection would keep this client's instances alive: they are withdrawn
    /// in the background.
    fn dropped(&self, lifetime: &Arc<ClientLifetime>) {
        if self.connection.is_closing() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let lifetime = lifetime.clone();
                let connection = self.connection.clone();
                let group = self.group.clone();
                runtime.spawn(async move {
                    if let Err(error) = withdraw(&lifetime, &connection, &group).await {
                        tracing::warn!(%error, "withdrawing a dropped Nacos client failed");
                    }
                });
            }
            Err(_) => {
                lifetime.closed.cancel();
                tracing::warn!(url = %lifetime.url, "Nacos client dropped outside a tokio runtime without close(); its instances stay until its connection ends");
            }
        }
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
            "nacos://nacos",
            Duration::from_millis(500),
            |url| async move { NacosRegistry::connect(&url).await },
        )
        .await;
    }
}
