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
//!
//! # Hot upgrade
//! Nacos identifies an instance by its address, and an ephemeral instance belongs to the
//! connection that registered it. Measured against rnacos (tests/tests/upgrade_registry.rs
//! and an exploration of both sequences): when a second connection (the hot upgrade's new
//! process) registers the same address, the instance stays listed as it was (the first
//! registration's data; no change is published) and from then on belongs to the *new*
//! connection: the old connection's close no longer removes it — nor, in fact, does an
//! explicit deregistration from the old connection — while the new connection's close
//! does, at once. The sequence chosen does not rely on the second point: the old process
//! [releases](Registry::release) the instance (forgets it: no deregistration, no
//! re-registration after a reconnection) and closes its connection, and a watcher sees
//! the instance throughout.
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
//! nothing keeps it. A registration or unregistration that times out stays queued in the
//! SDK, which applies it when the server returns.
//!
//! # Files
//! `config.rs` (the URL's parameters), `connection.rs` (the SDK's connection, the
//! registrations written through it and the probe: presence), `watch.rs` (one
//! subscription's read-on-change loop and the SDK listeners they share), `codec.rs` (an
//! instance and a Nacos instance), `error.rs` (what the SDK's errors mean), `login.rs` (the
//! HTTP login); this file connects and answers the [`Registry`] calls with them.

mod codec;
mod config;
mod connection;
mod error;
mod login;
mod watch;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use rpc_core::{Instance, Registry, RegistryError, ServiceKey, Subscription, SubscriptionId};

use crate::remote::lifetime::ClientLifetime;
use crate::url::RegistryUrl;
use codec::to_nacos;
use connection::ConnectionKeeper;
use watch::{GroupWatch, ServiceWatch};

pub use codec::{INSTANCE_METADATA_KEY, service_name};
pub use config::{DEFAULT_CLUSTER, DEFAULT_GROUP, DEFAULT_NAMESPACE, DEFAULT_PORT, NacosConfig};
pub use connection::PROBE_INTERVAL;

/// A registry client backed by Nacos through nacos-sdk (see the module documentation).
///
/// Dropping it without [`Registry::close`] starts the same withdrawal in the background
/// (on the current tokio runtime, if any).
pub struct NacosRegistry {
    /// Its URL, subscriptions and background tasks, and whether it was closed.
    lifetime: Arc<ClientLifetime>,
    /// The SDK's connection and the registrations written through it.
    connection: Arc<ConnectionKeeper>,
    /// Reads and change listeners of the subscriptions.
    group: Arc<GroupWatch>,
    /// Cluster this client's instances register in.
    cluster: String,
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
        let group = GroupWatch::new(
            lifetime.clone(),
            config.group,
            config.network.request_timeout,
        );
        Ok(Self {
            lifetime,
            connection,
            group: Arc::new(group),
            cluster: config.cluster,
        })
    }
}

impl fmt::Debug for NacosRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NacosRegistry")
            .field("url", &self.lifetime.url)
            .finish_non_exhaustive()
    }
}

impl Drop for NacosRegistry {
    fn drop(&mut self) {
        if self.connection.is_closing() {
            return;
        }
        // The SDK's connection would keep this client's instances alive: withdraw them.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let lifetime = self.lifetime.clone();
                let connection = self.connection.clone();
                let group = self.group.clone();
                runtime.spawn(async move {
                    if let Err(error) = withdraw(&lifetime, &connection, &group).await {
                        tracing::warn!(%error, "withdrawing a dropped Nacos client failed");
                    }
                });
            }
            Err(_) => {
                self.lifetime.closed.cancel();
                tracing::warn!(url = %self.lifetime.url, "Nacos client dropped outside a tokio runtime without close(); its instances stay until its connection ends");
            }
        }
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
    connection: &ConnectionKeeper,
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
    group.unlisten_all(&naming).await;
    tracing::debug!(url = %lifetime.url, "Nacos registry closed");
    deregistered
}

#[async_trait]
impl Registry for NacosRegistry {
    fn url(&self) -> &str {
        &self.lifetime.url
    }

    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        let naming = self.connection.naming()?;
        let name = service_name(&instance.service);
        let nacos = to_nacos(instance, &name, &self.cluster)
            .map_err(|error| self.lifetime.failed("register", error))?;
        self.connection
            .register(&naming, &instance.id, name, nacos)
            .await?;
        tracing::debug!(url = %self.lifetime.url, instance = %instance.id, service = %instance.service, "registered in Nacos");
        Ok(())
    }

    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        let naming = self.connection.naming()?;
        let name = service_name(&instance.service);
        if self
            .connection
            .unregister(&naming, &instance.id, &name)
            .await?
        {
            tracing::debug!(url = %self.lifetime.url, instance = %instance.id, service = %instance.service, "unregistered from Nacos");
        }
        Ok(())
    }

    /// See "Hot upgrade" above: the instance stays registered through the new process's
    /// connection; this client only stops writing and deregistering it.
    async fn release(&self, instance: &Instance) -> Result<(), RegistryError> {
        let name = service_name(&instance.service);
        if self.connection.forget(&instance.id, &name).await {
            tracing::debug!(url = %self.lifetime.url, instance = %instance.id, "released to another Nacos connection");
        }
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        let naming = self.connection.naming()?;
        let (watch, first) = ServiceWatch::open(
            self.group.clone(),
            self.connection.clone(),
            naming,
            service.clone(),
        )
        .await?;
        let follow = |id, cancel, publisher| watch.run(id, cancel, publisher);
        Ok(self
            .lifetime
            .start_subscription(service, self.group.next_revision(), first, follow))
    }

    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        self.lifetime.subscriptions.close(id)
    }

    async fn close(&self) -> Result<(), RegistryError> {
        withdraw(&self.lifetime, &self.connection, &self.group).await
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
