//! The checks serde cannot make: ranges, relations between settings, and values that
//! must parse (registry URLs, the bind address).

use super::error::ConfigError;
use rpc_registry::RegistryFormat;

use super::{Config, RegistryConfig, protocol};

impl Config {
    /// Checks what serde cannot: ranges, relations, and values that must parse (registry
    /// URLs, the bind address). Returns the offending key and what is wrong.
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (name, registry) in &self.registries {
            rpc_registry::check_url(&registry.url)
                .map_err(|error| (format!("registries.{name}.url"), error.to_string()))?;
            rpc_registry::check_url_as(&registry.url, registry.format)
                .map_err(|error| (format!("registries.{name}.format"), error.to_string()))?;
        }
        self.protocol
            .validate()
            .map_err(|(key, reason)| (format!("protocol.{key}"), reason))?;
        self.graceful_shutdown
            .validate()
            .map_err(|(key, reason)| (format!("graceful_shutdown.{key}"), reason))?;
        self.provider
            .limit
            .validate()
            .map_err(|(key, reason)| (format!("provider.limit.{key}"), reason))?;
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
        self.consumer
            .validate_connections()
            .map_err(|(key, reason)| (format!("consumer.{key}"), reason))?;
        if let Some(tls) = &self.consumer.tls {
            let named = |(key, reason): (&str, String)| (format!("consumer.{key}"), reason);
            protocol::readable("tls.ca", Some(&tls.ca)).map_err(named)?;
            protocol::readable("tls.cert", tls.cert.as_ref()).map_err(named)?;
            protocol::readable("tls.key", tls.key.as_ref()).map_err(named)?;
            if tls.cert.is_some() != tls.key.is_some() {
                let missing = if tls.cert.is_some() { "key" } else { "cert" };
                return Err((
                    format!("consumer.tls.{missing}"),
                    "a client certificate needs both `cert` and `key`".into(),
                ));
            }
        }
        nested("consumer.directory", self.consumer.directory.validate())?;
        if self.admin.enabled {
            self.admin
                .bind_addr()
                .map_err(|(key, message)| (key.to_owned(), message))?;
            self.admin
                .check_allowed_hosts()
                .map_err(|(key, message)| (key.to_owned(), message))?;
        }
        self.metrics
            .validate()
            .map_err(|(key, reason)| (format!("metrics.{key}"), reason))?;
        self.tracing
            .validate()
            .map_err(|(key, reason)| (format!("tracing.{key}"), reason))
    }

    pub(super) fn with_defaults(mut self) -> Result<Self, ConfigError> {
        if self.registries.is_empty() {
            self.registries.insert(
                "default".to_owned(),
                RegistryConfig {
                    url: "memory://".to_owned(),
                    format: RegistryFormat::Rpc,
                },
            );
        }
        Ok(self)
    }
}
