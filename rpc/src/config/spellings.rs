//! Every source respelled with our own keys before the sources merge: dubbo-go's
//! kebab-case (`step-timeout`), and its names for a section (`shutdown:` for
//! `graceful_shutdown:`), become the key serde writes.
//!
//! serde reads an alias by itself, but only within one document. A file that writes
//! `[shutdown]` and an environment that sets `RPC_GRACEFUL_SHUTDOWN__TIMEOUT` would
//! merge into two keys for one field, which serde refuses as a duplicate ("duplicate
//! field `graceful_shutdown`"). So each source is respelled first, and then the
//! environment overrides the file key by key, whatever either spelled.
//!
//! The spellings are not listed here, where they could drift from the structs: serde is
//! asked. The defaults written out (`Config::default()` serialized) give every section's
//! own keys; a key of a source that is not among them is another spelling of the key `c`
//! exactly when serde, given both at that place, refuses the second as a duplicate of
//! `c`. A key that is neither is an entry of a map keyed by name (`registries.main`,
//! `provider.services.helloworld.Greeter`), whose own keys are those of an entry read
//! empty and written out, or a key serde will refuse as unknown. The probes are small
//! documents deserialized from memory, made only for keys not spelled as ours.
//!
//! Not respelled: keys inside a setting that is unset by default and has no defaults of
//! its own to compare with (`protocol.tls`, `consumer.tls`); there serde's aliases still
//! apply within one source.

use std::borrow::Cow;
use std::sync::LazyLock;

use config::{Map, Value, ValueKind};
use serde_json::{Map as JsonMap, Value as Json};

use super::Config;
use super::error::KeyError;

/// `Config::default()` written out: every section with its own keys. Made once.
static DEFAULTS: LazyLock<Json> =
    LazyLock::new(|| serde_json::to_value(Config::default()).unwrap_or(Json::Null));

/// Our own keys, and the way to learn another spelling's.
pub(super) struct Spellings {
    /// Every section with its own keys ([`DEFAULTS`]).
    defaults: &'static Json,
}

impl Spellings {
    pub(super) fn new() -> Self {
        Self {
            defaults: &DEFAULTS,
        }
    }

    /// Respells every key of `source` (a whole file or the whole environment, as a
    /// tree) that is another spelling of one of ours.
    ///
    /// # Errors
    /// A key given twice in `source`, under two spellings.
    pub(super) fn respell(&self, source: &mut Map<String, Value>) -> Result<(), KeyError> {
        self.respell_under(&mut Vec::new(), source, self.defaults.as_object())
    }

    fn respell_under(
        &self,
        path: &mut Vec<String>,
        table: &mut Map<String, Value>,
        defaults: Option<&JsonMap<String, Json>>,
    ) -> Result<(), KeyError> {
        let Some(defaults) = defaults else {
            return Ok(());
        };
        let mut keys: Vec<String> = table.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let Some(mut value) = table.remove(&key) else {
                continue;
            };
            let own = if defaults.contains_key(&key) {
                key.clone()
            } else {
                self.own_spelling(path, &key, defaults)
                    .unwrap_or_else(|| key.clone())
            };
            let below = match defaults.get(&own) {
                Some(Json::Object(section)) => Some(Cow::Borrowed(section)),
                // A value, or a setting unset by default: nothing to respell below.
                Some(_) => None,
                None => self.entry_defaults(path, &own).map(Cow::Owned),
            };
            path.push(own.clone());
            if let ValueKind::Table(entries) = &mut value.kind {
                self.respell_under(path, entries, below.as_deref())?;
            }
            let result = match table.get_mut(&own) {
                Some(earlier) => join(path, earlier, value, (&key, &own)),
                None => {
                    table.insert(own, value);
                    Ok(())
                }
            };
            path.pop();
            result?;
        }
        Ok(())
    }

    /// Our spelling of `key`, written at `path` where `defaults` are our keys: the key
    /// serde names when it refuses `key` and that key together as a duplicate.
    fn own_spelling(
        &self,
        path: &[String],
        key: &str,
        defaults: &JsonMap<String, Json>,
    ) -> Option<String> {
        // Most keys that are not ours are no field at all: one probe says so.
        let unknown = format!("unknown field `{key}`");
        if let Err(error) = probe(path, [(key.to_owned(), Json::Null)])
            && error.to_string().contains(&unknown)
        {
            return None;
        }
        // Dubbo-go's kebab-case is the likely one: asked first.
        let snake = key.replace('-', "_");
        let likely = defaults.get_key_value(&snake);
        let others = defaults.iter().filter(|(own, _)| **own != snake);
        likely.into_iter().chain(others).find_map(|(own, default)| {
            let both = [
                (key.to_owned(), default.clone()),
                (own.clone(), default.clone()),
            ];
            let duplicate = format!("duplicate field `{own}`");
            match probe(path, both) {
                Err(error) if error.to_string().contains(&duplicate) => Some(own.clone()),
                _ => None,
            }
        })
    }

    /// The keys of an entry `key` of the map at `path` (such as a reference under
    /// `consumer.references`), with their defaults: the entry read empty and written
    /// out. `None` where `path` holds no map, or its entries cannot be read empty.
    fn entry_defaults(&self, path: &[String], key: &str) -> Option<JsonMap<String, Json>> {
        let config = probe(path, [(key.to_owned(), Json::Object(JsonMap::new()))]).ok()?;
        let mut written = serde_json::to_value(config).ok()?;
        for segment in path.iter().chain([&key.to_owned()]) {
            written = written.get_mut(segment)?.take();
        }
        match written {
            Json::Object(entry) => Some(entry),
            _ => None,
        }
    }
}

/// The configuration read from a document that holds only `entries`, at `path`.
fn probe<const N: usize>(
    path: &[String],
    entries: [(String, Json); N],
) -> Result<Config, serde_json::Error> {
    let mut document = Json::Object(entries.into_iter().collect());
    for segment in path.iter().rev() {
        document = Json::Object(JsonMap::from_iter([(segment.clone(), document)]));
    }
    serde_json::from_value(document)
}

/// Puts `value` where `earlier` already is: the same key at `path`, given in the same
/// source as `written` and as `own`, two spellings of it. Two sections are joined key by
/// key; one value given twice is an error.
fn join(
    path: &mut Vec<String>,
    earlier: &mut Value,
    value: Value,
    (written, own): (&str, &str),
) -> Result<(), KeyError> {
    let origin = value.origin().map(str::to_owned);
    let (ValueKind::Table(below), ValueKind::Table(entries)) = (&mut earlier.kind, value.kind)
    else {
        return Err(KeyError {
            key: path.join("."),
            message: format!(
                "given twice, as `{written}` and as `{own}` (two spellings of one key): keep one"
            ),
            origin,
        });
    };
    for (key, entry) in entries {
        path.push(key.clone());
        let result = match below.get_mut(&key) {
            Some(there) => join(path, there, entry, (written, own)),
            None => {
                below.insert(key, entry);
                Ok(())
            }
        };
        path.pop();
        result?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The source `yaml` as the loader reads it, respelled.
    fn respelled(yaml: &str) -> Result<Json, KeyError> {
        let source = config::File::from_str(yaml, config::FileFormat::Yaml);
        let mut tree = config::Source::collect(&source).unwrap();
        Spellings::new().respell(&mut tree)?;
        Ok(Value::new(None, ValueKind::Table(tree))
            .try_deserialize::<Json>()
            .unwrap())
    }

    #[test]
    fn dubbo_go_spellings_become_ours_at_every_level() {
        let tree = respelled(
            "shutdown:\n  step-timeout: 1s\n  callback-timeout: 2s\nprotocol:\n  \
             max-server-recv-msg-size: 1MiB\n  advertise-host: h\nconsumer:\n  \
             references:\n    a.B:\n      retry-budget: { min-per-second: 3 }\n      \
             hash-key: k\n  directory: { closing-invoker-expire-time: 5s }\n",
        )
        .unwrap();
        let expected = serde_json::json!({
            "graceful_shutdown": { "step_timeout": "1s", "callback_timeout": "2s" },
            "protocol": { "max_decoding_message_size": "1MiB", "advertise_host": "h" },
            "consumer": {
                "references": { "a.B": { "retry_budget": { "min_per_second": 3 }, "hash_key": "k" } },
                "directory": { "closing_invoker_expire_time": "5s" },
            },
        });
        assert_eq!(tree, expected);
    }

    #[test]
    fn names_keys_and_unknown_keys_are_left_as_written() {
        let yaml = "registries:\n  my-registry: { url: \"memory://\" }\nprovider:\n  services:\n    \
                    a.B: { metadata: { zone-name: a } }\ncolour-scheme: blue\n";
        let tree = respelled(yaml).unwrap();
        assert_eq!(tree["registries"]["my-registry"]["url"], "memory://");
        assert_eq!(
            tree["provider"]["services"]["a.B"]["metadata"]["zone-name"],
            "a"
        );
        assert_eq!(tree["colour-scheme"], "blue");
    }

    #[test]
    fn two_spellings_of_one_section_join_and_of_one_value_are_refused() {
        let tree =
            respelled("shutdown: { timeout: 9s }\ngraceful_shutdown: { step_timeout: 1s }\n")
                .unwrap();
        assert_eq!(
            tree["graceful_shutdown"],
            serde_json::json!({ "timeout": "9s", "step_timeout": "1s" })
        );
        let twice =
            respelled("graceful_shutdown:\n  step-timeout: 1s\n  step_timeout: 2s\n").unwrap_err();
        assert_eq!(twice.key, "graceful_shutdown.step_timeout");
        assert!(
            twice.message.contains("`step-timeout`"),
            "{}",
            twice.message
        );
        let twice = respelled("shutdown: { timeout: 9s }\ngraceful_shutdown: { timeout: 1s }\n")
            .unwrap_err();
        assert_eq!(twice.key, "graceful_shutdown.timeout");
    }
}
