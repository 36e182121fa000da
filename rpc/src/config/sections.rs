//! The sections of the configuration file, one type each, with their defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_cluster::{BlacklistConfig, DirectoryConfig, ReferenceConfig};
use rpc_core::Compression;
use rpc_transport::ClientTls;
use serde::{Deserialize, Serialize};

use super::limit::LimitConfig;

/// `application`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApplicationConfig {
    /// Name used in logs and registry metadata. Default `rpc-application`.
    pub name: String,
    /// Whether start-up installs the default `tracing` subscriber (stderr, `RUST_LOG`,
    /// else `info` for rpc's crates and `warn` for others) when the application has not
    /// installed one itself. Default true; false leaves logging wholly to the
    /// application.
    pub logging: bool,
}

impl Default for ApplicationConfig {
    fn default() -> Self {
        Self {
            name: "rpc-application".to_owned(),
            logging: true,
        }
    }
}

/// One entry of `registries`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// `memory://`, `static://h:p,...`, `etcd://...`, `zookeeper://...`, `nacos://...`.
    pub url: String,
}

/// `provider`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Settings per provided service, by gRPC service name (`helloworld.Greeter`).
    pub services: BTreeMap<String, ServiceConfig>,
    /// The adaptive concurrency limit on inbound requests (off by default).
    pub limit: LimitConfig,
    /// Serve gRPC server reflection (`grpc.reflection.v1` and `v1alpha`), so that tools
    /// such as `grpcurl list` find the services and their messages. Needs the services'
    /// descriptors: `ApplicationBuilder::file_descriptor_set`. Default false.
    pub reflection: bool,
}

/// One entry of `provider.services`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    /// Group. Default none.
    pub group: String,
    /// Version. Default none.
    pub version: String,
    /// Load-balancing weight. Default 100.
    pub weight: u32,
    /// Register this long after the service is ready (delay export). Default 0.
    #[serde(with = "humantime_serde")]
    pub delay: Duration,
    /// Metadata registered with the instance.
    pub metadata: BTreeMap<String, String>,
    /// How its responses are compressed, for clients that accept it (their
    /// `grpc-accept-encoding`): `none`, `gzip` or `zstd`. Compressed requests are read
    /// whatever this says. Default none.
    pub compression: Compression,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            group: String::new(),
            version: String::new(),
            weight: rpc_core::DEFAULT_WEIGHT,
            delay: Duration::ZERO,
            metadata: BTreeMap::new(),
            compression: Compression::None,
        }
    }
}

/// `consumer`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsumerConfig {
    /// Fail start-up when a reference has no provider within `check_timeout`.
    /// Default true (Dubbo's default).
    pub check: bool,
    /// Bound on waiting for a provider at start-up. Default 3 s.
    #[serde(with = "humantime_serde", alias = "check-timeout")]
    pub check_timeout: Duration,
    /// Registry references subscribe to, by name. Default: the first one.
    pub registry: Option<String>,
    /// Settings per reference, by gRPC service name.
    pub references: BTreeMap<String, ReferenceConfig>,
    /// Outlier ejection.
    pub blacklist: BlacklistConfig,
    /// How registry notifications are applied (empty protection, closing expiry, P2C).
    pub directory: DirectoryConfig,
    /// TLS to providers: `{ ca, domain, cert, key }` — the CA providers' certificates
    /// must chain to (PEM), the name they must carry (default: the address dialled),
    /// and this consumer's certificate and key for providers that ask for one (mutual
    /// TLS; default none). Default none: plain HTTP/2.
    pub tls: Option<ClientTls>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            check: true,
            check_timeout: Duration::from_secs(3),
            registry: None,
            references: BTreeMap::new(),
            blacklist: BlacklistConfig::default(),
            directory: DirectoryConfig::default(),
            tls: None,
        }
    }
}
