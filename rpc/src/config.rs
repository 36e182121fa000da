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
//! ```
//!
//! Every key can be overridden from the environment as `RPC_<SECTION>__<KEY>` (variables
//! starting with `RPC_` but without `__` are not configuration and are ignored), e.g.
//! `RPC_GRACEFUL_SHUTDOWN__TIMEOUT=25s` or `RPC_PROTOCOL__PORT=20881` (environment keys
//! are lower-cased, so map keys with capitals or dots, such as service names, can only
//! be set in the file). Dubbo-go's kebab-case spellings are accepted (`step-timeout`,
//! and `shutdown` for `graceful_shutdown`). Unknown keys, bad durations and negative
//! numbers are errors that name the key and the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rpc_cluster::{BlacklistConfig, DirectoryConfig, ReferenceConfig};
use rpc_core::ShutdownConfig;
use serde::{Deserialize, Serialize};

/// The whole configuration of one application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            application: ApplicationConfig::default(),
            registries: BTreeMap::from([(
                "default".to_owned(),
                RegistryConfig {
                    url: "memory://".to_owned(),
                },
            )]),
            protocol: ProtocolConfig::default(),
            provider: ProviderConfig::default(),
            consumer: ConsumerConfig::default(),
            graceful_shutdown: ShutdownConfig::default(),
        }
    }
}

/// `application`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApplicationConfig {
    /// Name used in logs and registry metadata. Default `rpc-application`.
    pub name: String,
}

impl Default for ApplicationConfig {
    fn default() -> Self {
        Self {
            name: "rpc-application".to_owned(),
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

/// `protocol`: the listener of this application's providers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProtocolConfig {
    /// Protocol name; `tri` (Dubbo's Triple, gRPC-compatible) and `grpc` both mean gRPC
    /// over HTTP/2. Default `tri`.
    pub name: String,
    /// IP to bind. Default `127.0.0.1`; use `0.0.0.0` with `advertise_host` to serve
    /// other hosts (e.g. the pod IP on Kubernetes).
    pub host: String,
    /// Port to bind; 0 picks a free one (consumers find it through the registry).
    /// Default 0.
    pub port: u16,
    /// Host consumers dial. Default: `host`, or `127.0.0.1` if `host` is unspecified.
    #[serde(alias = "advertise-host")]
    pub advertise_host: Option<String>,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        Self {
            name: "tri".to_owned(),
            host: "127.0.0.1".to_owned(),
            port: 0,
            advertise_host: None,
        }
    }
}

/// `provider`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Settings per provided service, by gRPC service name (`helloworld.Greeter`).
    pub services: BTreeMap<String, ServiceConfig>,
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
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            group: String::new(),
            version: String::new(),
            weight: rpc_core::DEFAULT_WEIGHT,
            delay: Duration::ZERO,
            metadata: BTreeMap::new(),
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
        }
    }
}

/// A configuration that could not be loaded. The message names the file and the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read or parsed as YAML/TOML.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key is unknown or its value is invalid.
    #[error("{origin}: key `{key}`: {message}")]
    Invalid {
        /// Where the value came from: the file, or `environment`.
        origin: String,
        /// The dotted key, e.g. `graceful_shutdown.timeout`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl Config {
    /// Loads `path` (`.yaml`, `.yml` or `.toml`) and applies `RPC_*` environment
    /// overrides.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for an unreadable or malformed file, [`ConfigError::Invalid`]
    /// naming the key and its origin for an unknown key or a bad value.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => config::FileFormat::Yaml,
            Some("toml") => config::FileFormat::Toml,
            _ => {
                return Err(ConfigError::Parse {
                    file: path.to_owned(),
                    message: "unknown format: use a .yaml, .yml or .toml file".to_owned(),
                });
            }
        };
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Parse {
            file: path.to_owned(),
            message: error.to_string(),
        })?;
        let source = config::File::from_str(&text, format);
        Self::load(source, &path.display().to_string())
    }

    /// Parses configuration text (for tests and embedded defaults); `name` stands for the
    /// file in errors.
    ///
    /// # Errors
    /// As [`Config::from_file`].
    pub fn from_str(
        text: &str,
        format: config::FileFormat,
        name: &str,
    ) -> Result<Self, ConfigError> {
        Self::load(config::File::from_str(text, format), name)
    }

    /// The defaults plus `RPC_*` environment overrides.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a bad environment value.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::load(
            config::File::from_str("", config::FileFormat::Yaml),
            "environment",
        )
    }

    fn load(
        source: config::File<config::FileSourceString, config::FileFormat>,
        name: &str,
    ) -> Result<Self, ConfigError> {
        let merged = config::Config::builder()
            .add_source(source)
            .add_source(
                config::Environment::with_prefix("RPC")
                    .prefix_separator("_")
                    .separator("__")
                    .try_parsing(true)
                    .source(Some(overrides())),
            )
            .build()
            .map_err(|error| ConfigError::Parse {
                file: PathBuf::from(name),
                message: error.to_string(),
            })?;
        let config = serde_path_to_error::deserialize::<_, Config>(merged.clone())
            .map_err(|error| invalid(&merged, name, error))
            .and_then(Config::with_defaults)?;
        config
            .validate()
            .map_err(|(key, message)| ConfigError::Invalid {
                origin: origin_of(&merged, &key, name),
                key,
                message,
            })?;
        Ok(config)
    }

    /// Checks what serde cannot: ranges, relations, and values that must parse (registry
    /// URLs, the bind address). Returns the offending key and what is wrong.
    fn validate(&self) -> Result<(), (String, String)> {
        for (name, registry) in &self.registries {
            rpc_registry::check_url(&registry.url)
                .map_err(|error| (format!("registries.{name}.url"), error.to_string()))?;
        }
        if !matches!(self.protocol.name.as_str(), "tri" | "grpc") {
            return Err((
                "protocol.name".into(),
                format!(
                    "`{}` is not a protocol: use `tri` or `grpc`",
                    self.protocol.name
                ),
            ));
        }
        if self.protocol.host.parse::<std::net::IpAddr>().is_err() {
            return Err((
                "protocol.host".into(),
                format!("`{}` is not an IP address to bind", self.protocol.host),
            ));
        }
        if self.consumer.check_timeout.is_zero() {
            return Err((
                "consumer.check_timeout".into(),
                "must be more than 0".into(),
            ));
        }
        // `consumer.registry` may name a registry the application supplies in code
        // (`ApplicationBuilder::registry`), so start-up checks it, not the file.
        let nested = |section: &str, result: Result<(), rpc_cluster::InvalidSetting>| {
            result.map_err(|invalid| (format!("{section}.{}", invalid.key), invalid.reason))
        };
        for (service, reference) in &self.consumer.references {
            nested(
                &format!("consumer.references.{service}"),
                reference.validate(),
            )?;
        }
        nested("consumer.blacklist", self.consumer.blacklist.validate())?;
        nested("consumer.directory", self.consumer.directory.validate())
    }

    fn with_defaults(mut self) -> Result<Self, ConfigError> {
        if self.registries.is_empty() {
            self.registries.insert(
                "default".to_owned(),
                RegistryConfig {
                    url: "memory://".to_owned(),
                },
            );
        }
        Ok(self)
    }
}

/// The `RPC_<SECTION>__<KEY>` variables of the environment. Every setting lives in a
/// section, so an override always has a `__`; other `RPC_*` variables (a test's
/// `RPC_TEST_ETCD_URL`, a script's own) are not configuration and are left alone.
fn overrides() -> config::Map<String, String> {
    std::env::vars()
        .filter(|(name, _)| {
            name.strip_prefix("RPC_")
                .is_some_and(|rest| rest.contains("__"))
        })
        .collect()
}

/// Where the value at `key` came from: the environment variable that set it, or the file.
fn origin_of(merged: &config::Config, key: &str, file: &str) -> String {
    let variable = format!("RPC_{}", key.to_uppercase().replace('.', "__"));
    if std::env::var_os(&variable).is_some() {
        return format!("environment variable {variable}");
    }
    merged
        .get::<config::Value>(key)
        .ok()
        .and_then(|value| value.origin().map(str::to_owned))
        .filter(|origin| !origin.is_empty())
        .unwrap_or_else(|| file.to_owned())
}

fn invalid(
    merged: &config::Config,
    name: &str,
    error: serde_path_to_error::Error<config::ConfigError>,
) -> ConfigError {
    let mut key = error.path().to_string();
    let inner = error.into_inner();
    let mut message = match &inner {
        config::ConfigError::Message(message) => message.clone(),
        other => other.to_string(),
    };
    if let Some(cut) = message.find(" for key `") {
        message.truncate(cut);
    }
    // serde reports an unknown field at its parent; name the field itself.
    if let Some(field) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
        && !key.ends_with(field)
    {
        key = if key == "." || key.is_empty() {
            field.to_owned()
        } else {
            format!("{key}.{field}")
        };
    }
    let origin = origin_of(merged, &key, name);
    ConfigError::Invalid {
        origin,
        key,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::FileFormat;

    fn yaml(text: &str) -> Result<Config, ConfigError> {
        Config::from_str(text, FileFormat::Yaml, "test.yaml")
    }

    /// The registry may come from code (`ApplicationBuilder::registry`), so the file alone
    /// cannot tell that the name is unknown; start-up checks it.
    #[test]
    fn consumer_registry_may_name_a_registry_given_in_code() {
        let config = yaml("consumer:\n  registry: supplied-in-code\n").unwrap();
        assert_eq!(
            config.consumer.registry.as_deref(),
            Some("supplied-in-code")
        );
    }

    #[test]
    fn an_unknown_registry_scheme_names_the_key() {
        let error = yaml("registries:\n  main:\n    url: foo://x\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("registries.main.url"), "{error}");
        assert!(error.contains("unknown scheme `foo`"), "{error}");
    }

    #[test]
    fn the_design_example_loads() {
        let config = yaml(
            r#"
application: { name: greeter-provider }
registries:
  main: { url: "etcd://127.0.0.1:2379" }
protocol: { name: tri, port: 20880 }
provider:
  services:
    org.example.Greeter: { version: "1.0.0", weight: 100 }
consumer:
  check: true
  references:
    org.example.Greeter: { cluster: failover, retries: 2, loadbalance: p2c, timeout: 3s }
graceful_shutdown:
  timeout: 60s
  step_timeout: 3s
  consumer_update_wait_time: 3s
  offline_request_window_timeout: 500ms
  internal_signal: true
"#,
        )
        .unwrap();
        assert_eq!(config.protocol.port, 20880);
        assert_eq!(
            config.provider.services["org.example.Greeter"].version,
            "1.0.0"
        );
        assert_eq!(config.consumer.references["org.example.Greeter"].retries, 2);
        assert_eq!(
            config.graceful_shutdown.offline_request_window_timeout,
            Duration::from_millis(500)
        );
        assert_eq!(config.registries["main"].url, "etcd://127.0.0.1:2379");
    }

    #[test]
    fn dubbo_go_spellings_are_aliases() {
        let config =
            yaml("shutdown:\n  step-timeout: 1s\n  consumer-update-wait-time: 2s\n").unwrap();
        assert_eq!(
            config.graceful_shutdown.step_timeout,
            Duration::from_secs(1)
        );
        assert_eq!(
            config.graceful_shutdown.consumer_update_wait_time,
            Duration::from_secs(2)
        );
    }

    #[test]
    fn an_empty_file_gives_the_defaults_and_the_memory_registry() {
        let config = yaml("").unwrap();
        assert_eq!(config.registries["default"].url, "memory://");
        assert_eq!(config.graceful_shutdown, ShutdownConfig::default());
        assert!(config.consumer.check);
    }

    fn invalid_key(text: &str) -> (String, String) {
        match yaml(text).unwrap_err() {
            ConfigError::Invalid {
                origin,
                key,
                message,
            } => {
                assert_eq!(origin, "test.yaml");
                (key, message)
            }
            other => panic!("expected Invalid, got {other}"),
        }
    }

    #[test]
    fn errors_name_the_key_and_the_file() {
        let (key, message) = invalid_key("graceful_shutdown:\n  timout: 3s\n");
        assert_eq!(key, "graceful_shutdown.timout");
        assert!(message.contains("unknown field"), "{message}");

        let (key, message) = invalid_key("graceful_shutdown:\n  timeout: soon\n");
        assert_eq!(key, "graceful_shutdown.timeout");
        assert!(message.contains("duration"), "{message}");

        let (key, _) = invalid_key("graceful_shutdown:\n  step_timeout: -3s\n");
        assert_eq!(key, "graceful_shutdown.step_timeout");

        let (key, _) = invalid_key("provider:\n  services:\n    a.B: { weight: -5 }\n");
        assert_eq!(key, "provider.services.a.B.weight");

        let (key, _) = invalid_key("colour: blue\n");
        assert_eq!(key, "colour");

        let (key, message) = invalid_key("consumer:\n  blacklist: { jitter: 7.5 }\n");
        assert_eq!(key, "consumer.blacklist.jitter");
        assert!(message.contains("0.0..=1.0"), "{message}");

        let (key, _) = invalid_key("consumer:\n  references:\n    a.B: { forks: 0 }\n");
        assert_eq!(key, "consumer.references.a.B.forks");

        let (key, message) = invalid_key("registries:\n  main: { url: \"redis://x\" }\n");
        assert_eq!(key, "registries.main.url");
        assert!(message.contains("unknown scheme `redis`"), "{message}");

        let (key, _) = invalid_key("protocol: { host: not-a-host }\n");
        assert_eq!(key, "protocol.host");

        let error = yaml("protocol: [").unwrap_err().to_string();
        assert!(error.starts_with("test.yaml: "), "{error}");
    }

    #[test]
    fn a_references_retry_budget_and_failback_load_in_either_spelling() {
        let config = yaml(
            "consumer:\n  references:\n    a.B:\n      cluster: failback\n      \
             retry_budget: { ratio: 0.5, min_per_second: 1, ttl: 2s }\n      \
             failback: { retry-period: 100ms, retries: 2, queue-capacity: 16 }\n    \
             c.D:\n      retry-budget: { min-per-second: 3 }\n",
        )
        .unwrap();
        let a = &config.consumer.references["a.B"];
        assert_eq!(a.retry_budget.ratio, 0.5);
        assert_eq!(a.retry_budget.ttl, Duration::from_secs(2));
        assert_eq!(a.failback.retry_period, Duration::from_millis(100));
        assert_eq!(a.failback.queue_capacity, 16);
        assert_eq!(
            config.consumer.references["c.D"]
                .retry_budget
                .min_per_second,
            3
        );

        let (key, message) =
            invalid_key("consumer:\n  references:\n    a.B: { retry_budget: { ttl: 500ms } }\n");
        assert_eq!(key, "consumer.references.a.B.retry_budget.ttl");
        assert!(message.contains("whole seconds"), "{message}");
        let (key, _) =
            invalid_key("consumer:\n  references:\n    a.B: { failback: { retries: 0 } }\n");
        assert_eq!(key, "consumer.references.a.B.failback.retries");
    }
}
