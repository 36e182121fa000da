//! Keys of dubbo-go's `shutdown` section that are not spellings of ours, so that a
//! dubbo-go configuration either means the same here or says why it cannot:
//!
//! - `closing-invoker-expire-time` is our `consumer.directory.closing_invoker_expire_time`
//!   (the same meaning — how long a consumer keeps an instance marked closing, and a
//!   removed one's connection for its calls in flight — and the same 30 s default), which
//!   dubbo-go keeps under `shutdown`: it is moved there;
//! - `reject-handler` plugs in what a closing dubbo-go provider answers to new requests.
//!   Ours has no such door: the refusal is built in (see [`REJECT_HANDLER`]), so the key
//!   is refused, saying so.
//!
//! Applied to each source after it is respelled (`spellings.rs`), so `shutdown:` and
//! `graceful_shutdown:` are one section by then.

use config::{Map, Value, ValueKind};

use super::error::KeyError;

/// Where the closing instances' expiry lives here.
const CLOSING_EXPIRY: [&str; 3] = ["consumer", "directory", "closing_invoker_expire_time"];

/// Why `reject-handler` has no equivalent here.
const REJECT_HANDLER: &str = "dubbo-go's reject handler has no equivalent here: from shutdown \
     step 3 on, a closing provider refuses every new request itself, without running it, with \
     UNAVAILABLE and `rpc-not-executed: closing` (our consumers send it to another instance; \
     other gRPC clients get REFUSED_STREAM and retry by themselves); remove this key";

/// Moves `graceful_shutdown.closing-invoker-expire-time` of `source` to
/// `consumer.directory.closing_invoker_expire_time`, and refuses
/// `graceful_shutdown.reject-handler`.
///
/// # Errors
/// `reject-handler` given, or the expiry given in both places.
pub(super) fn apply(source: &mut Map<String, Value>) -> Result<(), KeyError> {
    let Some(ValueKind::Table(shutdown)) = source.get_mut("graceful_shutdown").map(|v| &mut v.kind)
    else {
        return Ok(());
    };
    if let Some((key, value)) = take_any(shutdown, &["reject-handler", "reject_handler"]) {
        return Err(KeyError {
            key: format!("graceful_shutdown.{key}"),
            message: REJECT_HANDLER.to_owned(),
            origin: value.origin().map(str::to_owned),
        });
    }
    let Some((key, expiry)) = take_any(
        shutdown,
        &["closing-invoker-expire-time", "closing_invoker_expire_time"],
    ) else {
        return Ok(());
    };
    let ours = CLOSING_EXPIRY.join(".");
    let twice = |origin: Option<&str>| KeyError {
        key: ours.clone(),
        message: format!(
            "given twice, also as graceful_shutdown.{key} (dubbo-go's place for it): keep one"
        ),
        origin: origin.map(str::to_owned),
    };
    let mut table = source;
    for section in &CLOSING_EXPIRY[..2] {
        let node = table
            .entry((*section).to_owned())
            .or_insert_with(|| Value::new(None, ValueKind::Table(Map::new())));
        let ValueKind::Table(below) = &mut node.kind else {
            // Not a section: serde refuses it, naming it.
            return Ok(());
        };
        table = below;
    }
    if table.contains_key(CLOSING_EXPIRY[2]) {
        return Err(twice(expiry.origin()));
    }
    table.insert(CLOSING_EXPIRY[2].to_owned(), expiry);
    Ok(())
}

/// The first of `keys` in `table`, removed, with its value.
fn take_any(table: &mut Map<String, Value>, keys: &[&str]) -> Option<(String, Value)> {
    keys.iter()
        .find_map(|key| table.remove(*key).map(|value| ((*key).to_owned(), value)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::{Config, ConfigError, ConfigFormat};

    fn load(text: &str, format: ConfigFormat) -> Result<Config, ConfigError> {
        Config::from_str_with_env(text, format, "dubbo-go.yaml", [])
    }

    /// Issue 25, point 10: dubbo-go's expiry in its shutdown section means ours.
    #[test]
    fn closing_invoker_expire_time_under_shutdown_is_the_directorys() {
        let config = load(
            "shutdown:\n  timeout: 20s\n  closing-invoker-expire-time: 7s\n",
            ConfigFormat::Yaml,
        )
        .unwrap();
        assert_eq!(
            config.consumer.directory.closing_invoker_expire_time,
            Duration::from_secs(7)
        );
        assert_eq!(config.graceful_shutdown.timeout, Duration::from_secs(20));
        let toml = load(
            "[graceful_shutdown]\nclosing_invoker_expire_time = \"9s\"\n",
            ConfigFormat::Toml,
        )
        .unwrap();
        assert_eq!(
            toml.consumer.directory.closing_invoker_expire_time,
            Duration::from_secs(9)
        );
        // The environment still overrides it, at our key.
        let config = Config::from_str_with_env(
            "shutdown:\n  closing-invoker-expire-time: 7s\n",
            ConfigFormat::Yaml,
            "dubbo-go.yaml",
            [(
                "RPC_CONSUMER__DIRECTORY__CLOSING_INVOKER_EXPIRE_TIME".to_owned(),
                "11s".to_owned(),
            )],
        )
        .unwrap();
        assert_eq!(
            config.consumer.directory.closing_invoker_expire_time,
            Duration::from_secs(11)
        );
    }

    #[test]
    fn the_expiry_in_both_places_and_a_bad_one_name_the_key_and_the_file() {
        let error = load(
            "shutdown:\n  closing-invoker-expire-time: 7s\nconsumer:\n  directory:\n    \
             closing_invoker_expire_time: 8s\n",
            ConfigFormat::Yaml,
        )
        .unwrap_err();
        let shown = error.to_string();
        assert!(
            shown
                .starts_with("dubbo-go.yaml: key `consumer.directory.closing_invoker_expire_time`"),
            "{shown}"
        );
        assert!(shown.contains("closing-invoker-expire-time"), "{shown}");
        let error = load(
            "shutdown:\n  closing-invoker-expire-time: soon\n",
            ConfigFormat::Yaml,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error
                .starts_with("dubbo-go.yaml: key `consumer.directory.closing_invoker_expire_time`"),
            "{error}"
        );
    }

    /// Issue 25, point 10: `reject-handler` is refused, saying what happens instead.
    #[test]
    fn reject_handler_is_refused_saying_what_we_do_instead() {
        for text in [
            "shutdown:\n  reject-handler: myHandler\n",
            "graceful_shutdown:\n  reject_handler: myHandler\n",
        ] {
            match load(text, ConfigFormat::Yaml).unwrap_err() {
                ConfigError::Invalid {
                    origin,
                    key,
                    message,
                } => {
                    assert_eq!(origin, "dubbo-go.yaml");
                    assert!(key.starts_with("graceful_shutdown.reject"), "{key}");
                    assert!(message.contains("no equivalent"), "{message}");
                    assert!(message.contains("rpc-not-executed"), "{message}");
                }
                other => panic!("expected Invalid, got {other}"),
            }
        }
        let from_env = Config::from_str_with_env(
            "",
            ConfigFormat::Yaml,
            "dubbo-go.yaml",
            [(
                "RPC_SHUTDOWN__REJECT_HANDLER".to_owned(),
                "myHandler".to_owned(),
            )],
        )
        .unwrap_err();
        let shown = from_env.to_string();
        assert!(
            shown.starts_with(
                "environment variable RPC_SHUTDOWN__REJECT_HANDLER: key \
                 `graceful_shutdown.reject_handler`"
            ),
            "{shown}"
        );
    }
}
