//! The configuration file: YAML or TOML, with environment overrides.
//!
//! ```yaml
//! application: { name: greeter-provider }
//! registries:
//!   main: { url: "etcd://127.0.0.1:2379" }
//! protocol: { name: tri, host: 127.0.0.1, port: 20880 }
//! provider:
//!   services:
//!     helloworld.Greeter: { version: "1.0.0", weight: 100 }
//!   limit: { enabled: true, max_limit: 1000 }   # adaptive concurrency limit, off by default
//! consumer:
//!   check: true
//!   references:
//!     helloworld.Greeter: { cluster: failover, retries: 2, loadbalance: p2c, timeout: 3s }
//! graceful_shutdown:
//!   timeout: 60s
//!   step_timeout: 3s
//!   consumer_update_wait_time: 3s
//!   offline_request_window_timeout: 500ms
//!   internal_signal: true
//! admin: { enabled: true, host: 127.0.0.1, port: 22222 }   # token: RPC_ADMIN__TOKEN
//! metrics: { enabled: true }
//! tracing: { enabled: true, otlp_endpoint: "http://127.0.0.1:4317" }   # endpoint: `otlp` feature
//! upgrade: { enabled: true, ready_timeout: 30s, pid_file: /run/greeter/pid }   # enabled: false in a pod
//! ```
//!
//! Every key can be overridden from the environment as `RPC_<SECTION>__<KEY>` (variables
//! starting with `RPC_` but without `__` are not configuration and are ignored), e.g.
//! `RPC_GRACEFUL_SHUTDOWN__TIMEOUT=25s` or `RPC_PROTOCOL__PORT=20881` (environment keys
//! are lower-cased, so map keys with capitals or dots, such as service names, can only
//! be set in the file). A variable's value is text: a setting that is text keeps it as
//! written (`RPC_ADMIN__TOKEN=0123`), and one that is a number, a boolean, a duration or
//! a size parses it. Dubbo-go's kebab-case spellings are accepted (`step-timeout`,
//! and `shutdown` for `graceful_shutdown`), in the file and the environment alike, and
//! merge with each other (`spellings.rs`); dubbo-go's `shutdown.closing-invoker-expire-time`
//! is our `consumer.directory.closing_invoker_expire_time`, and its `reject-handler` is
//! refused saying why (`dubbo_go.rs`). Unknown keys, bad durations and negative
//! numbers are errors that name the key and the file.
//!
//! # In code
//!
//! Every configuration struct is `#[non_exhaustive]`, so that a new key is never a
//! breaking change: start from its `Default` (or its `new`, where a value is required)
//! and set the fields you want.
//!
//! ```
//! use std::time::Duration;
//!
//! let mut config = lossless_rpc::Config::default();
//! config.application.name = "greeter-consumer".to_owned();
//! let reference = config
//!     .consumer
//!     .references
//!     .entry("helloworld.Greeter".to_owned())
//!     .or_default();
//! reference.timeout = Some(Duration::from_secs(1));
//! reference.retries = 1;
//! ```
//!
//! A struct expression does not compile outside the crate, `..Default::default()` or not:
//!
//! ```compile_fail
//! let reference = lossless_rpc::cluster::ReferenceConfig {
//!     retries: 1,
//!     ..Default::default()
//! };
//! ```

mod dubbo_go;
mod error;
mod limit;
mod load;
pub(crate) mod origin;
mod origins;
mod plain_messages;
mod protocol;
mod sections;
mod spellings;
mod validate;
mod whole_numbers;

use std::collections::BTreeMap;

use rpc_lifecycle::ShutdownConfig;
use rpc_lifecycle::UpgradeConfig;
use serde::{Deserialize, Serialize};

use origin::BUILT_IN_CODE;

pub use crate::admin::AdminConfig;
pub use crate::observe::{AccessLogConfig, MetricsConfig, TracingConfig};
pub use error::ConfigError;
pub use limit::LimitConfig;
pub use load::ConfigFormat;
pub use protocol::ProtocolConfig;
pub use sections::{
    ApplicationConfig, ConsumerConfig, ProviderConfig, RegistryConfig, ServiceConfig,
};

/// The whole configuration of one application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// The application itself.
    pub application: ApplicationConfig,
    /// Registries by name. Default: one, `default`, at `memory://` (in-process).
    pub registries: BTreeMap<String, RegistryConfig>,
    /// Where providers listen.
    pub protocol: ProtocolConfig,
    /// Provided services.
    pub provider: ProviderConfig,
    /// References to other services.
    pub consumer: ConsumerConfig,
    /// Graceful offline bounds and switches.
    #[serde(alias = "shutdown", alias = "graceful-shutdown")]
    pub graceful_shutdown: ShutdownConfig,
    /// The admin endpoint (probes, offline/online, status). Default: on, loopback,
    /// port 22222.
    pub admin: AdminConfig,
    /// Prometheus metrics.
    pub metrics: MetricsConfig,
    /// Spans per call, and their OTLP export.
    pub tracing: TracingConfig,
    /// One JSON line per call (off by default).
    #[serde(alias = "access-log")]
    pub access_log: AccessLogConfig,
    /// The hot upgrade (a new binary on the same socket): see `lossless_rpc::upgrade`.
    pub upgrade: UpgradeConfig,
    /// Where this configuration came from (see [`Config::origin`]).
    #[serde(skip)]
    origin: String,
    /// Each registry URL that an environment variable set, by registry name: its
    /// variable (a URL its backend refuses at start-up is named by where it came from).
    #[serde(skip)]
    registry_url_origins: BTreeMap<String, String>,
}

impl Config {
    /// Where this configuration came from, as errors about it name it: the file it was
    /// read from, the name given to [`Config::from_str`], `environment` for
    /// [`Config::from_env`], or `configuration built in code` for [`Config::default`].
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Where the URL of the registry `name` came from: its environment variable, or
    /// [`Config::origin`].
    pub(crate) fn registry_url_origin(&self, name: &str) -> &str {
        self.registry_url_origins
            .get(name)
            .map_or(self.origin.as_str(), String::as_str)
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            application: ApplicationConfig::default(),
            registries: BTreeMap::from([(
                "default".to_owned(),
                RegistryConfig {
                    url: "memory://".to_owned(),
                    format: rpc_registry::RegistryFormat::Rpc,
                },
            )]),
            protocol: ProtocolConfig::default(),
            provider: ProviderConfig::default(),
            consumer: ConsumerConfig::default(),
            graceful_shutdown: ShutdownConfig::default(),
            admin: AdminConfig::default(),
            metrics: MetricsConfig::default(),
            tracing: TracingConfig::default(),
            access_log: AccessLogConfig::default(),
            upgrade: UpgradeConfig::default(),
            origin: BUILT_IN_CODE.to_owned(),
            registry_url_origins: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests;
