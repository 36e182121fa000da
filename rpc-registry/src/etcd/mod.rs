//! The etcd v3 backend: `etcd://[user:pass@]host:port[,host:port...][?ttl=10s&prefix=/rpc]`.
//!
//! # Layout
//! One instance is one key, its value the instance's JSON:
//! `<prefix>/<service.path_segment()>/providers/<instance id>`, e.g.
//! `/rpc/helloworld.Greeter:1.0.0/providers/10.0.0.1:50051-1f2e...`. The path segment is
//! unique per interface, group and version, so a prefix read of
//! `<prefix>/<segment>/providers/` is exactly one service.
//!
//! # Presence
//! Every key this client writes is attached to one lease of `ttl` (default 10 s) that a
//! background task keeps alive (a keep-alive every third of the TTL). A process that dies
//! stops renewing it and etcd deletes its keys when the TTL runs out. When the lease is lost
//! anyway (etcd unreachable for longer than the TTL, restarted without its data, or this
//! process paused past it), the task grants a new lease as soon as etcd answers again and
//! writes the registrations under it, retrying (100 ms doubling to 1 s) until they hold;
//! [`Registry::reregistering`](rpc_core::Registry::reregistering) is true meanwhile.
//!
//! # Ownership: an entry belongs to the lease it hangs on
//! Only `register` writes a key whoever holds it. Everything else is conditional on the
//! key's lease, compared by etcd in the same transaction (`txn.rs`): a renewal after a
//! lost lease writes a key only where it is absent or still on the lease this client
//! wrote it under, and `unregister` deletes it only while it hangs on this client's
//! lease. A key found on another lease belongs to another client (a newer generation):
//! it is left alone and forgotten here, with one log line, so this client neither writes
//! it again nor deletes it. Closing revokes the lease, which deletes only the keys still
//! attached to it.
//!
//! # Hot upgrade: how ownership moves
//! A put attaches a key to the lease it names, taking it off any lease it had. The hot
//! upgrade's new process registers the same instance (same id, so the same key) under its
//! own lease before it reports ready: the key never disappears (a watcher sees one PUT),
//! and from then on it belongs to the new lease. The old process then
//! [releases](rpc_core::Registry::release) it (forgets it without deleting) and closes:
//! revoking its lease deletes nothing of the new process's. Should the old process lose
//! its lease during the hand-over (paused past its TTL), its renewal finds the key on the
//! new process's lease and leaves it there; should the upgrade fail instead, the old
//! process registers again (a put: the key comes back to its lease before the killed new
//! process's lease expires).
//!
//! # Subscriptions
//! A subscription reads the prefix, then watches it from the revision of that read plus
//! one, so no change between the read and the watch is lost. Snapshot revisions are etcd
//! revisions. When the watch breaks (connection lost, revision compacted) the loop reads
//! and watches again after a short backoff; in between the consumer keeps the last set.
//!
//! # Parameters
//! `ttl` (whole seconds, at least 1 s, default 10 s), `prefix` (default `/rpc`),
//! `connect_timeout` (default 3 s: bound on connecting at start-up), `request_timeout`
//! (default 3 s: bound on every later request). The port defaults to 2379. Credentials in
//! the URL enable etcd authentication; they never appear in logs or errors. TLS (HTTPS to
//! every member): `tls_ca` (PEM file of the CA etcd's certificate chains to), with
//! `tls_cert` and `tls_key` for a client certificate (etcd's `--client-cert-auth`) and
//! `tls_domain` for the name etcd's certificate carries (default: the host dialled).
//!
//! # Client
//! The etcd client is this backend's own (`client.rs`), on stubs generated from etcd's
//! vendored protos and committed (`proto.rs`), so building needs no `protoc`, also in a
//! project that depends on `lossless-rpc`. Requests take the members
//! of the URL in turn and fail over to the next when one cannot be reached
//! (`members.rs`); with credentials every request carries etcd's token, renewed once when
//! etcd refuses it.
//!
//! # Files
//! `config.rs` (the URL's parameters), `client.rs` (connections and the requests),
//! `members.rs` (which member a request goes to), `auth.rs` (the token requests carry),
//! `proto.rs` (the generated etcd API), `lease.rs` (the lease and the
//! registrations under it: presence), `keep_alive.rs` (renewing one lease), `txn.rs` (the writes and deletes conditional on a
//! key's lease: ownership), `watch.rs` (one subscription's read-and-watch loop),
//! `codec.rs` (keys and values), `error.rs` (what the client's errors mean); this file
//! connects and answers the [`Registry`](rpc_core::Registry) calls with them.

mod auth;
mod client;
mod codec;
mod config;
mod error;
mod keep_alive;
mod lease;
mod member_heard;
mod members;
mod proto;
mod txn;
mod watch;
mod watch_stream;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rpc_core::{Instance, RegistryError, ServiceKey, Subscription};
use tokio::time::Instant;

use crate::remote::lifetime::ClientLifetime;
use crate::remote::{RemoteBackend, RemoteRegistry};
use crate::url::RegistryUrl;
use client::EtcdClient;
use codec::KeyLayout;
use error::{call, is_unavailable};
use lease::LeaseKeeper;
use watch::ServiceWatch;

pub use config::{DEFAULT_PORT, DEFAULT_PREFIX, DEFAULT_TTL, EtcdConfig, EtcdTls};

/// A registry client backed by etcd v3 (see the module documentation).
///
/// Dropping it without [`Registry::close`](rpc_core::Registry::close) stops the lease keep-alive, so its instances
/// disappear after the TTL, as if the process had died.
pub type EtcdRegistry = RemoteRegistry<EtcdBackend>;

/// What the etcd client does under the shared skeleton ([`RemoteRegistry`]): its
/// connection, key layout and lease.
pub struct EtcdBackend {
    etcd: EtcdClient,
    layout: KeyLayout,
    /// Bound on each request.
    request_timeout: Duration,
    /// The lease and the registrations under it.
    lease: Arc<LeaseKeeper>,
}

impl EtcdRegistry {
    /// Connects to the etcd cluster of `url` and checks that it answers.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] (see [`EtcdConfig::from_url`]);
    /// [`RegistryError::Unreachable`] when no member answers within `connect_timeout`;
    /// [`RegistryError::Operation`] when etcd answers with an error (e.g. bad credentials).
    pub async fn connect(url: &RegistryUrl) -> Result<Self, RegistryError> {
        let config = EtcdConfig::from_url(url)?;
        Self::with_config(url.redacted().to_owned(), config).await
    }

    /// Connects with explicit settings; `url` (credentials redacted) names the registry in
    /// logs and errors.
    ///
    /// # Errors
    /// As [`EtcdRegistry::connect`].
    pub async fn with_config(url: String, config: EtcdConfig) -> Result<Self, RegistryError> {
        let network = &config.network;
        let refused = |error: &error::EtcdError| !is_unavailable(error);
        let deadline = Instant::now() + network.connect_timeout;
        // `connect` only builds the channel (and authenticates when there are credentials);
        // the count-only read proves the cluster answers.
        let etcd = call(
            network.connect_timeout,
            EtcdClient::connect(network, config.tls.as_ref()),
        )
        .await
        .map_err(|failure| failure.into_connect_error(&url, network.connect_timeout, refused))?;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let probe = etcd.range_prefix(config.prefix.as_bytes(), true);
        call(left, probe).await.map_err(|failure| {
            failure.into_connect_error(&url, network.connect_timeout, refused)
        })?;
        let lifetime = Arc::new(ClientLifetime::new(url));
        let request_timeout = network.request_timeout;
        let lease = LeaseKeeper::start(lifetime.clone(), etcd.clone(), config.ttl, request_timeout);
        tracing::debug!(url = %lifetime.url, "connected to etcd");
        let backend = EtcdBackend {
            etcd,
            layout: KeyLayout::new(config.prefix),
            request_timeout,
            lease,
        };
        Ok(RemoteRegistry::new(lifetime, backend))
    }

    /// The key prefix under which the instances of `service` live (ends with `/`).
    pub fn service_prefix(&self, service: &ServiceKey) -> String {
        self.backend().layout.service_prefix(service)
    }
}

#[async_trait]
impl RemoteBackend for EtcdBackend {
    const CLIENT: &'static str = "EtcdRegistry";
    const NAME: &'static str = "etcd";

    async fn register(
        &self,
        lifetime: &ClientLifetime,
        instance: &Instance,
    ) -> Result<(), RegistryError> {
        let key = self.layout.key(instance);
        let value = codec::encode(instance).map_err(|error| lifetime.failed("register", error))?;
        self.lease.put(key, value).await
    }

    async fn unregister(&self, instance: &Instance) -> Result<bool, RegistryError> {
        self.lease.delete(self.layout.key(instance)).await
    }

    /// The new process's put of the same key attached the key to *its* lease (a put
    /// replaces a key's lease): revoking this client's lease, or letting it expire, no
    /// longer deletes it. All that is left is to stop writing it here again.
    async fn release(&self, instance: &Instance) -> Result<bool, RegistryError> {
        self.lease.forget(&self.layout.key(instance)).await
    }

    async fn subscribe(
        &self,
        lifetime: &Arc<ClientLifetime>,
        service: &ServiceKey,
    ) -> Result<Subscription, RegistryError> {
        let watch = ServiceWatch::new(
            lifetime.clone(),
            self.etcd.clone(),
            self.request_timeout,
            self.layout.service_prefix(service),
        );
        let first = watch
            .read()
            .await
            .map_err(|failure| failure.into_operation(&lifetime.url, "subscribe"))?;
        let (revision, instances) = (first.0, first.1.values().cloned().collect());
        let follow = |id, cancel, publisher| watch.run(id, cancel, publisher, first);
        Ok(lifetime.start_subscription(service, revision, instances, follow))
    }

    fn reregistering(&self) -> bool {
        self.lease.is_restoring()
    }

    async fn close(&self, _lifetime: &ClientLifetime) -> Result<(), RegistryError> {
        // Revoking the lease deletes every key of this client at once; the keeper does it
        // once no renewal is half done, after ending the subscriptions and tasks.
        self.lease.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing;

    #[tokio::test(start_paused = true)]
    async fn a_closed_port_is_unreachable_within_the_connect_timeout() {
        testing::assert_unreachable_in_time(
            "etcd://root",
            Duration::from_millis(300),
            |url| async move { EtcdRegistry::connect(&url).await },
        )
        .await;
    }
}
