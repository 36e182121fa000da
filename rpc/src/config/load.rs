//! Reading a configuration: the file (YAML or TOML) and the `RPC_*` environment
//! overrides, each respelled with our own keys (`spellings.rs`, `dubbo_go.rs`), the
//! overrides laid over the file, then the checks serde cannot make; every error names the
//! key and where its value came from (the file, or the variable).

use std::path::{Path, PathBuf};

use config::{Map, Value, ValueKind};

use super::dubbo_go;
use super::error::{ConfigError, KeyError};
use super::origins::{self, Origins};
use super::plain_messages;
use super::spellings::Spellings;
use super::{Config, whole_numbers};

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
        Self::load(text, format, name, &overrides(vars))
    }

    /// The defaults plus `RPC_*` environment overrides.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a bad environment value.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_str_with_env("", ConfigFormat::Yaml, "environment", std::env::vars())
    }

    fn load(
        text: &str,
        format: ConfigFormat,
        name: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let file = config::Source::collect(&config::File::from_str(text, format.parser()))
            .map_err(|error| ConfigError::Parse {
                file: PathBuf::from(name),
                message: error.to_string(),
            })?;
        let environment = environment_tree(overrides).map_err(|error| error.named(name))?;
        // Each source with our spellings, so that the environment overrides the file
        // key by key whatever either wrote (`spellings.rs`, `dubbo_go.rs`).
        let spellings = Spellings::new();
        let [file, environment] = [file, environment].map(|mut source| {
            spellings
                .respell(&mut source)
                .and_then(|()| dubbo_go::apply(&mut source))
                .map(|()| source)
                .map_err(|error| error.named(name))
        });
        let (file, environment) = (file?, environment?);
        let origins = Origins::new(name, &file, &environment);
        let merged = config::Value::new(None, ValueKind::Table(overlay(file.clone(), environment)));
        let mut config = serde_path_to_error::deserialize::<_, Config>(merged.clone())
            .map_err(|error| invalid(&origins, &merged, error))
            .and_then(Config::with_defaults)?;
        config.origin = name.to_owned();
        for registry in config.registries.keys() {
            let origin = origins.of(&format!("registries.{registry}.url"));
            if origin != name {
                config.registry_url_origins.insert(registry.clone(), origin);
            }
        }
        let named = |(key, message): (String, String)| ConfigError::Invalid {
            origin: origins.of(&key),
            message: plain_messages::with_decimal_units(
                &merged,
                &[[key.clone()].as_slice(), &origins::checked_against(&key)].concat(),
                origins.with_other_origins(&key, message),
            ),
            key,
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
fn rounded_number(merged: &config::Value, config: &Config) -> Option<(String, String)> {
    let input = merged.clone().try_deserialize::<serde_json::Value>().ok()?;
    let read = serde_json::to_value(config).ok()?;
    whole_numbers::first_rounded(&input, &read)
}

/// The `RPC_<SECTION>__<KEY>` variables among `vars`. Every setting lives in a section,
/// so an override always has a `__`; other `RPC_*` variables (a test's
/// `RPC_TEST_ETCD_URL`, a script's own) are not configuration and are left alone.
fn overrides(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut overrides: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| {
            name.strip_prefix("RPC_")
                .is_some_and(|rest| rest.contains("__"))
        })
        .collect();
    overrides.sort();
    overrides
}

/// The overrides as one source, a tree like a file's: `RPC_GRACEFUL_SHUTDOWN__TIMEOUT`
/// sets `graceful_shutdown.timeout` (lower-cased, `__` between the parts). Each value
/// is text (a string setting keeps `0123` as written; the deserializer parses text for
/// numbers, booleans, durations and sizes) and remembers its variable as its origin.
///
/// # Errors
/// A variable with an empty part (`RPC_ADMIN__PORT__`), or one that sets a key under
/// another variable's value (`RPC_ADMIN__PORT` and `RPC_ADMIN__PORT__X`).
fn environment_tree(overrides: &[(String, String)]) -> Result<Map<String, Value>, KeyError> {
    let mut tree = Map::new();
    for (name, text) in overrides {
        let origin = format!("environment variable {name}");
        let path = name["RPC_".len()..].to_lowercase();
        let refused = |message: String| KeyError {
            key: path.replace("__", "."),
            message,
            origin: Some(origin.clone()),
        };
        let parts: Vec<&str> = path.split("__").collect();
        if parts.iter().any(|part| part.is_empty()) {
            return Err(refused(format!(
                "`{name}` has an empty part: write RPC_<SECTION>__<KEY>, parts joined by `__`"
            )));
        }
        let Some((last, sections)) = parts.split_last() else {
            continue;
        };
        let mut table = &mut tree;
        for section in sections {
            let node = table
                .entry((*section).to_owned())
                .or_insert_with(|| Value::new(Some(&origin), ValueKind::Table(Map::new())));
            let ValueKind::Table(below) = &mut node.kind else {
                return Err(refused(format!(
                    "`{name}` sets a key under `{section}`, which another variable gives a value"
                )));
            };
            table = below;
        }
        if table.contains_key(*last) {
            return Err(refused(format!(
                "`{name}` sets `{last}`, which other variables set keys under"
            )));
        }
        let value = Value::new(Some(&origin), ValueKind::String(text.clone()));
        table.insert((*last).to_owned(), value);
    }
    Ok(tree)
}

/// `top` over `base`: sections are merged key by key, any other value of `top` replaces
/// `base`'s.
fn overlay(mut base: Map<String, Value>, top: Map<String, Value>) -> Map<String, Value> {
    for (key, value) in top {
        let merged = match (base.remove(&key), value) {
            (
                Some(Value {
                    kind: ValueKind::Table(below),
                    ..
                }),
                Value {
                    kind: ValueKind::Table(above),
                    ..
                },
            ) => Value::new(None, ValueKind::Table(overlay(below, above))),
            (_, value) => value,
        };
        base.insert(key, merged);
    }
    base
}

fn invalid(
    origins: &Origins,
    merged: &config::Value,
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
        && (field.is_empty() || !key.ends_with(field))
    {
        // A key that is the empty text (`"": 1`, whose path ends in an empty part) is
        // named as it is written, so the error still names a key.
        let (parent, field) = if field.is_empty() {
            (key.trim_end_matches('.'), "\"\"")
        } else {
            (key.as_str(), field)
        };
        key = if parent == "." || parent.is_empty() {
            field.to_owned()
        } else {
            format!("{parent}.{field}")
        };
    }
    if let Some(plain) = plain_messages::plainly(merged, &key, &message) {
        message = plain;
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

    /// Found by config_properties: a key that is the empty text is still named.
    #[test]
    fn an_empty_key_is_named_as_written() {
        for (text, named) in [("\"\": 1\n", "\"\""), ("admin:\n  \"\": 1\n", "admin.\"\"")] {
            let error =
                Config::from_str_with_env(text, ConfigFormat::Yaml, "app.yaml", []).unwrap_err();
            let ConfigError::Invalid { key, .. } = &error else {
                panic!("{error}");
            };
            assert_eq!(key, named, "{error}");
            assert!(error.to_string().contains("unknown field"), "{error}");
        }
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
            ("RPC_PROTOCOL__MAX_CONNECTIONS", "5000"),
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
        assert_eq!(config.protocol.max_connections, Some(5000));
        assert_eq!(
            config.upgrade.pid_file.as_deref(),
            Some(std::path::Path::new("/run/007.pid"))
        );
    }

    /// A list from the environment is one text, its names separated by commas.
    #[test]
    fn admin_allowed_hosts_from_the_environment_are_separated_by_commas() {
        let config =
            with_env(&[("RPC_ADMIN__ALLOWED_HOSTS", "a.internal, B.internal:22222")]).unwrap();
        assert_eq!(
            config.admin.allowed_hosts,
            ["a.internal", "B.internal:22222"]
        );
        let none = with_env(&[("RPC_ADMIN__ALLOWED_HOSTS", "")]).unwrap();
        assert!(none.admin.allowed_hosts.is_empty());
        match with_env(&[("RPC_ADMIN__ALLOWED_HOSTS", "a.internal,,b")]).unwrap_err() {
            ConfigError::Invalid { key, origin, .. } => {
                assert_eq!(key, "admin.allowed_hosts");
                assert_eq!(origin, "environment variable RPC_ADMIN__ALLOWED_HOSTS");
            }
            other => panic!("expected Invalid, got {other}"),
        }
    }

    fn toml_with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::from_str_with_env(text, ConfigFormat::Toml, "provider.toml", vars)
    }

    /// Issue 25, point 8: dubbo-go's `[shutdown]` in the file and our spelling in the
    /// environment (and the other way round) are one section: the variable overrides
    /// its key, the file keeps the rest.
    #[test]
    fn an_alias_in_the_file_and_an_override_in_the_environment_merge() {
        let file = "[shutdown]\ntimeout = \"25s\"\nstep-timeout = \"2s\"\n";
        let config = toml_with_env(file, &[("RPC_GRACEFUL_SHUTDOWN__TIMEOUT", "20s")]).unwrap();
        assert_eq!(config.graceful_shutdown.timeout, Duration::from_secs(20));
        assert_eq!(
            config.graceful_shutdown.step_timeout,
            Duration::from_secs(2)
        );

        let file = "[graceful_shutdown]\ntimeout = \"25s\"\n";
        let config = toml_with_env(file, &[("RPC_SHUTDOWN__STEP_TIMEOUT", "1s")]).unwrap();
        assert_eq!(config.graceful_shutdown.timeout, Duration::from_secs(25));
        assert_eq!(
            config.graceful_shutdown.step_timeout,
            Duration::from_secs(1)
        );

        // A key spelled both ways: the environment's value wins, as for any override.
        let file = "[protocol]\nmax-server-recv-msg-size = \"1MiB\"\n";
        let vars = [("RPC_PROTOCOL__MAX_DECODING_MESSAGE_SIZE", "2MiB")];
        let config = toml_with_env(file, &vars).unwrap();
        assert_eq!(config.protocol.max_decoding_message_size, 2 << 20);

        // A bad value given through the alias still names our key and its variable.
        match toml_with_env(file, &[("RPC_SHUTDOWN__TIMEOUT", "soon")]).unwrap_err() {
            ConfigError::Invalid { origin, key, .. } => {
                assert_eq!(origin, "environment variable RPC_SHUTDOWN__TIMEOUT");
                assert_eq!(key, "graceful_shutdown.timeout");
            }
            other => panic!("expected Invalid, got {other}"),
        }
    }

    /// Respelled before the comparison, a fraction given under dubbo-go's spelling of an
    /// integer setting is refused too (`whole_numbers.rs`).
    #[test]
    fn a_fraction_under_an_alias_is_not_rounded() {
        let error = toml_with_env("[provider.limit]\nmax-limit = 1000.5\n", &[]).unwrap_err();
        match error {
            ConfigError::Invalid { key, .. } => assert_eq!(key, "provider.limit.max_limit"),
            other => panic!("expected Invalid, got {other}"),
        }
    }

    /// Issue 25, point 8: a variable for a section that does not exist is named as the
    /// origin, not the file.
    #[test]
    fn an_unknown_section_from_the_environment_names_the_variable() {
        for (vars, key, variable) in [
            (&[("RPC_FOO__BAR", "1")][..], "foo", "RPC_FOO__BAR"),
            (
                &[("RPC_ADMIN__COLOUR", "blue")],
                "admin.colour",
                "RPC_ADMIN__COLOUR",
            ),
            (
                &[("RPC_ADMIN__PORT", "1"), ("RPC_ADMIN__PORT__X", "2")],
                "admin.port.x",
                "RPC_ADMIN__PORT__X",
            ),
            (
                &[("RPC_ADMIN__PORT__", "1")],
                "admin.port.",
                "RPC_ADMIN__PORT__",
            ),
        ] {
            match toml_with_env("[admin]\nport = 0\n", vars).unwrap_err() {
                ConfigError::Invalid {
                    origin, key: got, ..
                } => {
                    assert_eq!(
                        origin,
                        format!("environment variable {variable}"),
                        "{vars:?}"
                    );
                    assert_eq!(got, key, "{vars:?}");
                }
                other => panic!("{vars:?}: expected Invalid, got {other}"),
            }
        }
        // The file's own unknown section is still the file's.
        match toml_with_env("[foo]\nbar = 1\n", &[("RPC_FOO__BAZ", "2")]).unwrap_err() {
            ConfigError::Invalid { origin, key, .. } => {
                assert_eq!((origin.as_str(), key.as_str()), ("provider.toml", "foo"));
            }
            other => panic!("expected Invalid, got {other}"),
        }
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
