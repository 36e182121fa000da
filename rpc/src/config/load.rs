//! Reading a configuration: the file (YAML or TOML), then `RPC_*` environment overrides,
//! then the checks serde cannot make; every error names the key and where its value came
//! from.

use std::path::{Path, PathBuf};

use super::{Config, whole_numbers};

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

/// The text format of a configuration: what [`Config::from_str`] parses (and what
/// [`Config::from_file`] picks by the file's extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigFormat {
    /// YAML (`.yaml`, `.yml`).
    Yaml,
    /// TOML (`.toml`).
    Toml,
}

impl ConfigFormat {
    /// The format of a file with this extension (`yaml`, `yml`, `toml`), if any.
    pub fn from_extension(extension: &str) -> Option<Self> {
        match extension {
            "yaml" | "yml" => Some(Self::Yaml),
            "toml" => Some(Self::Toml),
            _ => None,
        }
    }

    fn parser(self) -> config::FileFormat {
        match self {
            Self::Yaml => config::FileFormat::Yaml,
            Self::Toml => config::FileFormat::Toml,
        }
    }
}

impl Config {
    /// Loads `path` (`.yaml`, `.yml` or `.toml`) and applies `RPC_*` environment
    /// overrides. The configuration remembers `path` as its [`origin`](Config::origin),
    /// so start-up errors about it name the file.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for an unreadable or malformed file, [`ConfigError::Invalid`]
    /// naming the key and its origin for an unknown key or a bad value.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let Some(format) = path
            .extension()
            .and_then(|e| e.to_str())
            .and_then(ConfigFormat::from_extension)
        else {
            return Err(ConfigError::Parse {
                file: path.to_owned(),
                message: "unknown format: use a .yaml, .yml or .toml file".to_owned(),
            });
        };
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Parse {
            file: path.to_owned(),
            message: error.to_string(),
        })?;
        Self::from_str(&text, format, &path.display().to_string())
    }

    /// Parses configuration text (for tests and embedded defaults) and applies the
    /// process's `RPC_*` environment overrides; `name` stands for the file in errors and
    /// is the configuration's [`origin`](Config::origin).
    ///
    /// # Errors
    /// As [`Config::from_file`].
    pub fn from_str(text: &str, format: ConfigFormat, name: &str) -> Result<Self, ConfigError> {
        Self::from_str_with_env(text, format, name, std::env::vars())
    }

    /// As [`Config::from_str`], with the environment given instead of read from the
    /// process: `vars` are `(name, value)` pairs, of which the `RPC_<SECTION>__<KEY>`
    /// ones override the text. For tests of a configuration and its overrides (setting
    /// the process's environment is not safe while other threads run).
    ///
    /// # Errors
    /// As [`Config::from_file`]; a bad override names its variable.
    pub fn from_str_with_env(
        text: &str,
        format: ConfigFormat,
        name: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        Self::load(
            config::File::from_str(text, format.parser()),
            name,
            &overrides(vars),
        )
    }

    /// The defaults plus `RPC_*` environment overrides.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a bad environment value.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_str_with_env("", ConfigFormat::Yaml, "environment", std::env::vars())
    }

    fn load(
        source: config::File<config::FileSourceString, config::FileFormat>,
        name: &str,
        overrides: &config::Map<String, String>,
    ) -> Result<Self, ConfigError> {
        let merged = config::Config::builder()
            .add_source(source)
            .add_source(
                config::Environment::with_prefix("RPC")
                    .prefix_separator("_")
                    .separator("__")
                    // Values stay text: a string setting keeps `0123` as written, and
                    // the deserializer parses text for the settings that are numbers,
                    // booleans, durations or sizes.
                    .try_parsing(false)
                    .source(Some(overrides.clone())),
            )
            .build()
            .map_err(|error| ConfigError::Parse {
                file: PathBuf::from(name),
                message: error.to_string(),
            })?;
        let origins = Origins {
            merged: &merged,
            file: name,
            overrides,
        };
        let mut config = serde_path_to_error::deserialize::<_, Config>(merged.clone())
            .map_err(|error| invalid(&origins, error))
            .and_then(Config::with_defaults)?;
        config.origin = name.to_owned();
        let named = |(key, message): (String, String)| ConfigError::Invalid {
            origin: origins.of(&key),
            key,
            message,
        };
        if let Some(rounded) = rounded_number(&merged, &config) {
            return Err(named(rounded));
        }
        config.validate().map_err(named)?;
        Ok(config)
    }
}

/// A fractional number of the input that the `config` crate rounded into an integer or
/// a boolean setting (see `whole_numbers.rs`), with its key.
fn rounded_number(merged: &config::Config, config: &Config) -> Option<(String, String)> {
    let input = merged.clone().try_deserialize::<serde_json::Value>().ok()?;
    let read = serde_json::to_value(config).ok()?;
    whole_numbers::first_rounded(&input, &read)
}

/// The `RPC_<SECTION>__<KEY>` variables among `vars`. Every setting lives in a section,
/// so an override always has a `__`; other `RPC_*` variables (a test's
/// `RPC_TEST_ETCD_URL`, a script's own) are not configuration and are left alone.
fn overrides(vars: impl IntoIterator<Item = (String, String)>) -> config::Map<String, String> {
    vars.into_iter()
        .filter(|(name, _)| {
            name.strip_prefix("RPC_")
                .is_some_and(|rest| rest.contains("__"))
        })
        .collect()
}

/// What an error needs to say where a value came from.
struct Origins<'a> {
    merged: &'a config::Config,
    file: &'a str,
    overrides: &'a config::Map<String, String>,
}

impl Origins<'_> {
    /// Where the value at `key` came from: the environment variable that set it, or the
    /// file.
    fn of(&self, key: &str) -> String {
        let variable = format!("RPC_{}", key.to_uppercase().replace('.', "__"));
        if self.overrides.contains_key(&variable) {
            return format!("environment variable {variable}");
        }
        self.merged
            .get::<config::Value>(key)
            .ok()
            .and_then(|value| value.origin().map(str::to_owned))
            .filter(|origin| !origin.is_empty())
            .unwrap_or_else(|| self.file.to_owned())
    }
}

fn invalid(
    origins: &Origins,
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
    // serde reports an unknown or a missing field at its parent; name the field itself.
    if let Some(field) = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next())
        && !key.ends_with(field)
    {
        key = if key == "." || key.is_empty() {
            field.to_owned()
        } else {
            format!("{key}.{field}")
        };
    }
    let origin = origins.of(&key);
    ConfigError::Invalid {
        origin,
        key,
        message,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn with_env(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::from_str_with_env("", ConfigFormat::Yaml, "app.yaml", vars)
    }

    /// Issue 25, point 7: a string setting keeps the variable's text exactly, however
    /// much it looks like a number or a boolean.
    #[test]
    fn a_string_setting_from_the_environment_keeps_its_text() {
        for text in ["0123", "007", "TRUE", "true", "1.50", "1e3", "-0"] {
            let config =
                with_env(&[("RPC_ADMIN__TOKEN", text), ("RPC_APPLICATION__NAME", text)]).unwrap();
            assert_eq!(config.admin.token(), Some(text));
            assert_eq!(config.application.name, text);
        }
    }

    /// Settings of other types still read their text from the environment.
    #[test]
    fn numbers_booleans_durations_and_sizes_still_parse_from_the_environment() {
        let config = with_env(&[
            ("RPC_PROTOCOL__PORT", "020881"),
            ("RPC_METRICS__ENABLED", "false"),
            ("RPC_GRACEFUL_SHUTDOWN__TIMEOUT", "25s"),
            ("RPC_PROTOCOL__MAX_HEADER_LIST_SIZE", "32KiB"),
            ("RPC_PROTOCOL__MAX_DECODING_MESSAGE_SIZE", "1048576"),
            ("RPC_CONSUMER__BLACKLIST__JITTER", "0.5"),
            ("RPC_PROTOCOL__KEEPALIVE_INTERVAL", "10s"),
            ("RPC_UPGRADE__PID_FILE", "/run/007.pid"),
        ])
        .unwrap();
        assert_eq!(config.protocol.port, 20881);
        assert!(!config.metrics.enabled);
        assert_eq!(config.graceful_shutdown.timeout, Duration::from_secs(25));
        assert_eq!(config.protocol.max_header_list_size, 32 << 10);
        assert_eq!(config.protocol.max_decoding_message_size, 1 << 20);
        assert_eq!(config.consumer.blacklist.jitter, 0.5);
        assert_eq!(
            config.protocol.keepalive_interval,
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            config.upgrade.pid_file.as_deref(),
            Some(std::path::Path::new("/run/007.pid"))
        );
    }

    /// Text that is not a value of the setting's type is refused naming the variable.
    #[test]
    fn a_bad_number_from_the_environment_names_the_variable() {
        for (variable, text, key) in [
            ("RPC_PROTOCOL__PORT", "20880.5", "protocol.port"),
            ("RPC_PROTOCOL__PORT", "-1", "protocol.port"),
            ("RPC_METRICS__ENABLED", "maybe", "metrics.enabled"),
            (
                "RPC_CONSUMER__BLACKLIST__JITTER",
                "lots",
                "consumer.blacklist.jitter",
            ),
        ] {
            match with_env(&[(variable, text)]).unwrap_err() {
                ConfigError::Invalid {
                    origin, key: got, ..
                } => {
                    assert_eq!(origin, format!("environment variable {variable}"));
                    assert_eq!(got, key, "{variable}={text}");
                }
                other => panic!("{variable}={text}: expected Invalid, got {other}"),
            }
        }
    }
}
