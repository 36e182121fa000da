//! What the network backends (etcd, ZooKeeper, Nacos) share, so that the three follow one
//! set of rules instead of three similar ones:
//!
//! - `settings`: [`NetworkSettings`], the servers, credentials and two time bounds every
//!   network URL carries, parsed and checked once;
//! - `lifetime`: `ClientLifetime`, the redacted URL that names a client and what closing it
//!   must stop (its subscriptions and background tasks);
//! - `snapshots`: `SnapshotPublisher`, the rules every subscription stream follows (first
//!   set always, duplicates dropped, revisions increasing), and `SubscriptionSet`;
//! - `retry`: bounded requests (`bounded`, `Failure`) and the capped `Backoff` of the
//!   background loops;
//! - `unusable`: entries a subscription skips (a foreign peer's it cannot read), each
//!   logged and counted once;
//! - `probe`: "refused" or "timed out" for a failed connect whose library does not say;
//! - `client`: [`RemoteRegistry`], the skeleton of every network client's `impl Registry`
//!   (closed checks, logs, subscriptions, drop), over each backend's `RemoteBackend`.
//!
//! Each backend is a folder with the same rooms, so that a reader who knows one knows them
//! all: `mod.rs` (what it is and why, its backend type and `impl RemoteBackend`; its
//! registry type is `RemoteRegistry` over it), `config.rs`
//! (its URL's parameters), the keeper of its liveness (etcd's `lease.rs`, ZooKeeper's
//! `session.rs`, Nacos' `connection.rs`: presence, and registering again after a loss),
//! `watch.rs` (one subscription's loop), `codec.rs` (an instance and its stored form) and
//! `error.rs` (what the client library's errors mean here).

mod client;
pub(crate) mod lifetime;
pub(crate) mod probe;
pub(crate) mod retry;
mod settings;
pub(crate) mod snapshots;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod unusable;

pub(crate) use client::RemoteBackend;
pub use client::RemoteRegistry;
pub use settings::NetworkSettings;
