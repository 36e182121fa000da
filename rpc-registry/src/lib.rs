//! # lossless-rpc-registry
//!
//! Registry backends for `lossless-rpc`, one module each, built from a URL by [`connect`]:
//!
//! | scheme | backend | feature |
//! |---|---|---|
//! | `memory://[NAME][?delay=300ms]` | in-process hub (the embedded default) | always |
//! | `static://host:port[,host:port]` | fixed list of addresses | always |
//! | `etcd://[user:pass@]host:port[,...][?ttl=10s&prefix=/rpc]` | etcd v3 | `etcd` |
//! | `zookeeper://[user:pass@]host:port[,...][?session_timeout=10s&root=/rpc]` | ZooKeeper | `zookeeper` |
//! | `nacos://[user:pass@]host:port[?namespace=public&group=DEFAULT_GROUP&cluster=DEFAULT]` | Nacos | `nacos` |
//!
//! The network backends also take `connect_timeout` (bound on connecting at start-up) and
//! `request_timeout` (bound on every later request), both [`DEFAULT_TIMEOUT`] by default;
//! an unknown parameter is an error naming it. Credentials never appear in logs or errors.
//! These settings, the hosts and the credentials are read alike for every network backend
//! (module `remote`, which holds what the three share); each backend's own parameters
//! are read in its folder's `config.rs`.
//!
//! Each backend stores instances in our layout ([`RegistryFormat::Rpc`]); ZooKeeper and
//! Nacos also speak Apache Dubbo's ([`RegistryFormat::Dubbo`], module [`dubbo`]), chosen
//! per client with [`connect_as`].
//!
//! Every backend implements [`lossless_rpc_core::Registry`](rpc_core::Registry) with
//! the same semantics (ephemeral registrations, full snapshots in revision order, no
//! empty snapshot because of a fault); the conformance suite in `tests/` checks each
//! against the real server.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod backends;
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
pub mod dubbo;
#[cfg(feature = "etcd")]
pub mod etcd;
mod format;
pub mod memory;
#[cfg(feature = "nacos")]
pub mod nacos;
#[cfg(any(feature = "etcd", feature = "zookeeper", feature = "nacos"))]
pub mod remote;
pub mod static_list;
pub mod url;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

use std::sync::Arc;
use std::time::Duration;

use rpc_core::{Registry, RegistryError};

pub use backends::{BACKENDS, Backend, Connect, SCHEMES, backend};
pub use format::RegistryFormat;
pub use memory::{MemoryHub, MemoryRegistry};
pub use static_list::StaticRegistry;
pub use url::RegistryUrl;

#[cfg(feature = "etcd")]
pub use etcd::EtcdRegistry;
#[cfg(feature = "nacos")]
pub use nacos::NacosRegistry;
#[cfg(any(feature = "etcd", feature = "zookeeper", feature = "nacos"))]
pub use remote::NetworkSettings;
#[cfg(feature = "zookeeper")]
pub use zookeeper::ZooKeeperRegistry;

/// Default of the `connect_timeout` and `request_timeout` parameters of the network
/// backends: how long connecting, and each request, may take before it fails.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// Builds a registry client from its URL and, for network backends, connects it.
///
/// # Errors
/// - [`RegistryError::InvalidUrl`] for a malformed URL, an unknown scheme, an unknown
///   parameter or a bad parameter value (the message names it), or a backend whose cargo
///   feature is off;
/// - [`RegistryError::Unreachable`] when the server does not answer within the connect
///   timeout (the message names it).
pub async fn connect(url: &str) -> Result<Arc<dyn Registry>, RegistryError> {
    connect_as(url, RegistryFormat::Rpc).await
}

/// As [`connect`], with the registry's entries in `format` (Dubbo's layout on ZooKeeper
/// or Nacos, say).
///
/// # Errors
/// As [`connect`], and [`RegistryError::InvalidUrl`] when the backend does not speak
/// `format` (see [`check_url_as`]).
pub async fn connect_as(
    url: &str,
    format: RegistryFormat,
) -> Result<Arc<dyn Registry>, RegistryError> {
    let url = check_url_as(url, format)?;
    let scheme = url.scheme();
    match backend(scheme).and_then(|backend| backend.connect) {
        Some(connect) => connect(url).await,
        None => Err(url.invalid(format!(
            "the `{scheme}` backend is not compiled in (enable the `{scheme}` feature of lossless-rpc or lossless-rpc-registry)"
        ))),
    }
}

/// Parses `url` and checks that its scheme is one of [`BACKENDS`], without connecting
/// (for validating configuration before start-up).
///
/// # Errors
/// [`RegistryError::InvalidUrl`] for a malformed URL or an unknown scheme.
pub fn check_url(url: &str) -> Result<RegistryUrl, RegistryError> {
    let url = RegistryUrl::parse(url)?;
    if backend(url.scheme()).is_none() {
        return Err(url.invalid(format!(
            "unknown scheme `{}` (known: {})",
            url.scheme(),
            SCHEMES.join(", ")
        )));
    }
    Ok(url)
}

/// As [`check_url`], and checks that the backend speaks `format`; the URL returned
/// carries it.
///
/// # Errors
/// As [`check_url`], and [`RegistryError::InvalidUrl`] naming the backends that speak
/// `format` when this one does not.
pub fn check_url_as(url: &str, format: RegistryFormat) -> Result<RegistryUrl, RegistryError> {
    let url = check_url(url)?;
    let speaks = |backend: &Backend| backend.formats.contains(&format);
    if backend(url.scheme()).is_some_and(|backend| !speaks(backend)) {
        let speakers: Vec<_> = BACKENDS
            .iter()
            .filter(|backend| speaks(backend))
            .map(|backend| backend.scheme)
            .collect();
        return Err(url.invalid(format!(
            "the {} backend does not speak the `{format}` format (only {} do)",
            url.scheme(),
            speakers.join(" and ")
        )));
    }
    Ok(url.with_format(format))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_scheme_is_named() {
        let error = connect("redis://127.0.0.1:6379")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown scheme `redis`"), "{error}");
        assert!(error.contains("memory, static, etcd"), "{error}");
    }

    #[tokio::test]
    async fn memory_and_static_build_from_urls() {
        assert_eq!(connect("memory://").await.unwrap().url(), "memory://");
        assert_eq!(
            connect("static://127.0.0.1:1,127.0.0.1:2")
                .await
                .unwrap()
                .url(),
            "static://127.0.0.1:1,127.0.0.1:2"
        );
    }
}
