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

    /// `message`, refusing the value at `key`, with where each other key of the same
    /// section it names was set, when another source set it: a check across two keys
    /// (a connection window less than a stream window) names one of them, whose source
    /// alone would otherwise point at the wrong place — the file, when a variable set
    /// the other value.
    pub(super) fn with_other_origins(&self, key: &str, message: String) -> String {
        let Some((section, _)) = key.rsplit_once('.') else {
            return message;
        };
        let origin = self.of(key);
        let mut noted: Vec<&str> = Vec::new();
        let mut notes = String::new();
        for word in message.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            let other = format!("{section}.{word}");
            if word.is_empty() || other == key || noted.contains(&word) {
                continue;
            }
            if let Some(set) = self.set_at(&other).filter(|set| *set != origin) {
                notes.push_str(&format!("; `{other}` is set by {}", by(&set, self.file)));
                noted.push(word);
            }
        }
        message + &notes
    }
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
    tree.iter().any(|(name, value)| {
        name == key
            || key
                .strip_prefix(name.as_str())
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| match &value.kind {
                    ValueKind::Table(below) => has_key(below, rest),
                    _ => false,
                })
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
