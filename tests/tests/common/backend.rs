//! Where the applications of one test find each other: the memory registry, or etcd at
//! `RPC_TEST_ETCD_URL` under a key prefix of the test's own.

use std::time::Duration;

use rpc::config::RegistryConfig;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationBuilder, Config};

/// Where the applications of one test find each other.
pub enum Backend {
    /// An in-process hub.
    Memory(MemoryHub),
    /// etcd, by URL.
    Etcd(String),
}

impl Backend {
    /// etcd at `RPC_TEST_ETCD_URL` under a key prefix of this test alone, or `None` (after
    /// saying why) when the variable is not set.
    pub fn etcd(test: &str) -> Option<Self> {
        match std::env::var("RPC_TEST_ETCD_URL") {
            Ok(url) if !url.trim().is_empty() => {
                let prefix = format!("/{test}-{:08x}", fastrand::u32(..));
                let separator = if url.contains('?') { '&' } else { '?' };
                Some(Backend::Etcd(format!(
                    "{}{separator}prefix={prefix}&ttl=5s",
                    url.trim()
                )))
            }
            _ => {
                assert!(
                    std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
                    "RPC_TEST_ETCD_URL is not set but RPC_TEST_REQUIRE_REGISTRIES is"
                );
                eprintln!(
                    "SKIPPED etcd::{test}: RPC_TEST_ETCD_URL is not set (scripts/test.sh sets it)"
                );
                None
            }
        }
    }

    pub fn builder(&self, config: Config) -> ApplicationBuilder {
        match self {
            Backend::Memory(hub) => super::builder_with(config, hub, Duration::ZERO),
            Backend::Etcd(url) => {
                let mut config = config;
                config
                    .registries
                    .insert("default".to_owned(), RegistryConfig::new(url.clone()));
                Application::builder(config)
            }
        }
    }
}
