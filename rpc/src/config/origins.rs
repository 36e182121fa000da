//! Where each value of one load came from — the file or the `RPC_*` variable that set it —
//! so that an error names the source of the value it refuses, and of any other value it
//! was checked against.

use config::{Map, Value, ValueKind};

/// What an error needs to say where a value came from.
pub(super) struct Origins<'a> {
    /// The file's name.
    file: &'a str,
    /// The file's keys, respelled.
    file_keys: &'a Map<String, Value>,
    /// Each key the environment set, respelled, and the variable that set it.
    variables: Vec<(String, String)>,
}

impl<'a> Origins<'a> {
    pub(super) fn new(
        file: &'a str,
        file_keys: &'a Map<String, Value>,
        environment: &Map<String, Value>,
    ) -> Self {
        let mut variables = Vec::new();
        set_by_variables(environment, "", &mut variables);
        Self {
            file,
            file_keys,
            variables,
        }
    }

    /// Where the value at `key` came from: the variable that set it; else the file, if
    /// it has the key; else a variable that set a key under it (an unknown section
    /// `RPC_FOO__BAR` is refused at `foo`); else the file.
    pub(super) fn of(&self, key: &str) -> String {
        let under = format!("{key}.");
        let exact = self.variables.iter().find(|(set, _)| set == key);
        let below = || {
            self.variables
                .iter()
                .find(|(set, _)| set.starts_with(&under))
        };
        match exact {
            Some((_, variable)) => variable.clone(),
            None if has_key(self.file_keys, key) => self.file.to_owned(),
            None => below().map_or_else(|| self.file.to_owned(), |(_, v)| v.clone()),
        }
    }

    /// Where the value at exactly `key` was set: its variable, or the file; `None` when
    /// neither sets it (its default).
    fn set_at(&self, key: &str) -> Option<String> {
        let variable = self.variables.iter().find(|(set, _)| set == key);
        match variable {
            Some((_, variable)) => Some(variable.clone()),
            None => has_key(self.file_keys, key).then(|| self.file.to_owned()),
        }
    }

    /// `message`, refusing the value at `key`, with where each key it was checked
    /// against ([`checked_against`]) was set, when another source set it: a check across
    /// two keys (a connection window less than a stream window) names one of them, whose
    /// source alone would otherwise point at the wrong place — the file, when a variable
    /// set the other value.
    pub(super) fn with_other_origins(&self, key: &str, message: String) -> String {
        let origin = self.of(key);
        let notes: String = checked_against(key)
            .into_iter()
            .filter_map(|other| {
                let set = self.set_at(&other).filter(|set| *set != origin)?;
                Some(format!("; `{other}` is set by {}", by(&set, self.file)))
            })
            .collect();
        message + &notes
    }
}

/// The checks across keys of a section: a key, by its last part, and the keys of the same
/// section its value is checked against (`rpc_transport`'s windows, `provider.limit`,
/// a reference's backoff, the blacklist's ejection times). The checks' messages name
/// these keys; the tests below load a configuration that fails each.
const CHECKED_AGAINST: [(&str, &[&str]); 5] = [
    (
        "initial_connection_window_size",
        &["initial_stream_window_size"],
    ),
    ("max_limit", &["min_limit"]),
    ("initial_limit", &["min_limit", "max_limit"]),
    ("backoff_base", &["backoff_max"]),
    ("base_ejection_time", &["max_ejection_time"]),
];

/// The whole keys the value at `key` is checked against, if any.
pub(super) fn checked_against(key: &str) -> Vec<String> {
    let Some((section, last)) = key.rsplit_once('.') else {
        return Vec::new();
    };
    CHECKED_AGAINST
        .iter()
        .filter(|(checked, _)| *checked == last)
        .flat_map(|(_, others)| others.iter().map(|other| format!("{section}.{other}")))
        .collect()
}

/// A source as the end of "set by …": a variable as it is named, the file as "the file …".
fn by(source: &str, file: &str) -> String {
    if source == file {
        format!("the file {file}")
    } else {
        source.to_owned()
    }
}

/// The dotted keys of the values in `tree`, each with its origin (the variable).
fn set_by_variables(tree: &Map<String, Value>, prefix: &str, out: &mut Vec<(String, String)>) {
    for (key, value) in tree {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match &value.kind {
            ValueKind::Table(below) => set_by_variables(below, &path, out),
            _ => out.push((path, value.origin().unwrap_or_default().to_owned())),
        }
    }
}

/// Whether `tree` has the dotted `key` (whose parts may hold dots themselves, as a
/// service name does).
fn has_key(tree: &Map<String, Value>, key: &str) -> bool {
    value_at(tree, key).is_some()
}

/// The value at the dotted `key` of `tree` (whose parts may hold dots themselves, as a
/// service name does).
pub(super) fn value_at<'a>(tree: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    tree.iter().find_map(|(name, value)| {
        if name == key {
            return Some(value);
        }
        let rest = key.strip_prefix(name.as_str())?.strip_prefix('.')?;
        match &value.kind {
            ValueKind::Table(below) => value_at(below, rest),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::{Config, ConfigError, ConfigFormat};

    /// The refused key, its origin and the message of loading `yaml` as `app.yaml` with
    /// `vars`.
    fn refused(yaml: &str, vars: &[(&str, &str)]) -> (String, String, String) {
        let owned = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        match Config::from_str_with_env(yaml, ConfigFormat::Yaml, "app.yaml", owned) {
            Err(ConfigError::Invalid {
                origin,
                key,
                message,
            }) => (key, origin, message),
            other => panic!("{yaml:?} with {vars:?}: expected Invalid, got {other:?}"),
        }
    }

    /// helper-22's find: the connection window from the file, refused against a stream
    /// window from a variable, named only the file.
    #[test]
    fn a_check_across_keys_names_where_the_other_value_was_set() {
        let file = "consumer:\n  initial_connection_window_size: 5MiB\n";
        let variable = "RPC_CONSUMER__INITIAL_STREAM_WINDOW_SIZE";
        let (key, origin, message) = refused(file, &[(variable, "8MiB")]);
        assert_eq!(key, "consumer.initial_connection_window_size");
        assert_eq!(origin, "app.yaml");
        assert!(
            message.ends_with(&format!(
                "; `consumer.initial_stream_window_size` is set by environment variable {variable}"
            )),
            "{message}"
        );

        let file = "protocol:\n  initial_stream_window_size: 2MiB\n";
        let variable = "RPC_PROTOCOL__INITIAL_CONNECTION_WINDOW_SIZE";
        let (key, origin, message) = refused(file, &[(variable, "1MiB")]);
        assert_eq!(key, "protocol.initial_connection_window_size");
        assert_eq!(origin, format!("environment variable {variable}"));
        assert!(
            message
                .ends_with("; `protocol.initial_stream_window_size` is set by the file app.yaml"),
            "{message}"
        );

        let file = "provider:\n  limit: { enabled: true, min_limit: 10 }\n";
        let (key, _, message) = refused(file, &[("RPC_PROVIDER__LIMIT__MAX_LIMIT", "5")]);
        assert_eq!(key, "provider.limit.max_limit");
        assert!(
            message.ends_with("; `provider.limit.min_limit` is set by the file app.yaml"),
            "{message}"
        );
    }

    #[test]
    fn the_checks_of_a_reference_and_of_the_blacklist_are_noted_too() {
        let file = "consumer:\n  references:\n    a.b: { backoff_base: 2s }\n";
        let variable = "RPC_CONSUMER__REFERENCES__A.B__BACKOFF_MAX";
        let (key, _, message) = refused(file, &[(variable, "1s")]);
        assert_eq!(key, "consumer.references.a.b.backoff_base");
        assert!(
            message.ends_with(&format!(
                "; `consumer.references.a.b.backoff_max` is set by environment variable {variable}"
            )),
            "{message}"
        );
        let variable = "RPC_CONSUMER__BLACKLIST__BASE_EJECTION_TIME";
        let file = "consumer:\n  blacklist: { max_ejection_time: 1s }\n";
        let (key, _, message) = refused(file, &[(variable, "5s")]);
        assert_eq!(key, "consumer.blacklist.base_ejection_time");
        assert!(
            message
                .ends_with("; `consumer.blacklist.max_ejection_time` is set by the file app.yaml"),
            "{message}"
        );
    }

    /// helper-24's find: words of the message (a value echoed back, a hint) that happen
    /// to be keys of the section were noted as if checked against.
    #[test]
    fn a_key_only_named_in_the_message_gets_no_note() {
        let (key, _, message) = refused(
            "protocol:\n  name: host\n",
            &[("RPC_PROTOCOL__HOST", "0.0.0.0")],
        );
        assert_eq!(key, "protocol.name");
        assert!(!message.contains("is set by"), "{message}");
        let (key, _, message) = refused(
            "consumer:\n  directory: { stall_factor: 0 }\n",
            &[("RPC_CONSUMER__DIRECTORY__STALL_DETECTION", "true")],
        );
        assert_eq!(key, "consumer.directory.stall_factor");
        assert!(!message.contains("is set by"), "{message}");
    }

    #[test]
    fn values_from_one_source_or_defaults_get_no_note() {
        let both_in_file = "consumer:\n  initial_stream_window_size: 8MiB\n  \
                            initial_connection_window_size: 5MiB\n";
        let (_, origin, message) = refused(both_in_file, &[]);
        assert_eq!(origin, "app.yaml");
        assert!(!message.contains("is set by"), "{message}");

        // The stream window left at its default (2 MiB) above the connection's.
        let variable = "RPC_CONSUMER__INITIAL_CONNECTION_WINDOW_SIZE";
        let (_, origin, message) = refused("", &[(variable, "1MiB")]);
        assert_eq!(origin, format!("environment variable {variable}"));
        assert!(!message.contains("is set by"), "{message}");
    }
}
