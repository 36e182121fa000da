//! The `config` crate's error messages, said plainly where they leave the reader
//! guessing.
//!
//! **An enum's choices.** The `config` crate's deserializer says only "enum ClusterKind does not have variant
//! constructor failfst"; serde's own message, "unknown variant `failfst`, expected one
//! of `failover`, `failfast`, …", lists what the key takes. serde_json's deserializer
//! passes serde's message through, so the same tree is read again through it.
//!
//! **A negative number.** `RPC_PROTOCOL__PORT=-5` was "invalid type: string \"-5\",
//! expected an integer" (a variable's value is text until a setting asks for a number,
//! and the crate parses only unsigned text for an unsigned setting); `port: -5` in a
//! file was "invalid type: 64-bit integer `-5`, expected an unsigned 64 bit or less
//! integer". Both now say the setting takes no negative number.
//!
//! **A size in decimal units.** `initial_stream_window_size: 64KB` is 64 000 bytes
//! (`parse-size`: K, M, G count in 1000s, Ki, Mi, Gi in 1024s) and was refused as "64000
//! is not from 65535 to …", leaving the reader to find why 64 KB is not 64 KiB. A value
//! refused after it loaded, or a value it was checked against, written with a decimal
//! unit (`64KB`, `64k`) now says what it was read as.

use config::{Value, ValueKind};

use super::Config;

/// What the message of an error at `key` should say instead, if anything.
pub(super) fn plainly(merged: &config::Value, key: &str, message: &str) -> Option<String> {
    negative(message).or_else(|| with_choices(merged, key, message))
}

/// For a negative number given to a setting that takes none: says so.
fn negative(message: &str) -> Option<String> {
    let number = if let Some(rest) = message.strip_prefix("invalid type: string \"") {
        rest.strip_suffix("\", expected an integer")?
    } else {
        let rest = message.strip_prefix("invalid type: 64-bit integer `")?;
        rest.split_once("`, expected an unsigned")?.0
    };
    let number: i64 = number.trim().parse().ok()?;
    (number < 0)
        .then(|| format!("{number} is negative: this setting takes a whole number of 0 or more"))
}

/// The `config` crate's words for a value that is no variant of its enum.
const NO_SUCH_VARIANT: &str = "does not have variant constructor";

/// For an error at `key` that names no choices: serde's message with the choices, if
/// reading `merged` through serde_json fails at the same key with it.
fn with_choices(merged: &config::Value, key: &str, message: &str) -> Option<String> {
    if !message.contains(NO_SUCH_VARIANT) {
        return None;
    }
    let tree = merged.clone().try_deserialize::<serde_json::Value>().ok()?;
    let error = serde_path_to_error::deserialize::<_, Config>(tree).err()?;
    let listed = error.inner().to_string();
    (error.path().to_string() == key && listed.starts_with("unknown variant")).then_some(listed)
}

/// `message`, refusing the values at `keys` after they loaded (the refused key and the
/// keys it was checked against), with what each size written in decimal units was read
/// as (`` `64KB` is 64000 bytes ``) and its binary spelling.
pub(super) fn with_decimal_units(merged: &Value, keys: &[String], message: String) -> String {
    let notes: String = keys
        .iter()
        .filter_map(|key| decimal_note(&text_at(merged, key)?, &message))
        .collect();
    message + &notes
}

/// The note on `text`, if it is a size in decimal units whose number of bytes `message`
/// names: so `5m`, a duration, is never called bytes (no duration's message names a
/// number of bytes of 1000 or more).
fn decimal_note(text: &str, message: &str) -> Option<String> {
    let (number, unit) = decimal_unit(text)?;
    let bytes = parse_size::parse_size(text)
        .ok()
        .filter(|bytes| *bytes >= 1000)?;
    let named = message
        .split(|c: char| !c.is_ascii_digit())
        .any(|word| word == bytes.to_string());
    named.then(|| {
        format!(
            "; `{text}` is {bytes} bytes: K, M and G count in 1000s, Ki, Mi and Gi in 1024s \
             (`{number}{}iB`)",
            unit[..1].to_ascii_uppercase()
        )
    })
}

/// The text of the value at the dotted `key` of `tree`, if it is text.
fn text_at(tree: &Value, key: &str) -> Option<String> {
    let ValueKind::Table(table) = &tree.kind else {
        return None;
    };
    match &super::origins::value_at(table, key)?.kind {
        ValueKind::String(text) => Some(text.clone()),
        _ => None,
    }
}

/// A size written with a decimal unit (`64KB`, `2 mb`, `64k`): its number and its unit.
fn decimal_unit(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = (text[..split].trim(), text[split..].trim());
    let decimal = ["k", "kb", "m", "mb", "g", "gb", "t", "tb"];
    (!number.is_empty() && decimal.contains(&unit.to_ascii_lowercase().as_str()))
        .then_some((number, unit))
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError, ConfigFormat};

    fn invalid(text: &str, vars: &[(&str, &str)]) -> (String, String) {
        let vars = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        match Config::from_str_with_env(text, ConfigFormat::Yaml, "app.yaml", vars) {
            Err(ConfigError::Invalid { key, message, .. }) => (key, message),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_value_that_is_no_variant_lists_the_variants() {
        let (key, message) = invalid(
            "consumer:\n  references:\n    a.B:\n      cluster: failfst\n",
            &[],
        );
        assert_eq!(key, "consumer.references.a.B.cluster");
        assert!(
            message.contains("`failfst`") && message.contains("`failfast`"),
            "{message}"
        );
    }

    #[test]
    fn a_negative_number_for_an_unsigned_setting_is_called_negative() {
        for (text, vars) in [
            ("", &[("RPC_PROTOCOL__PORT", "-5")][..]),
            ("protocol:\n  port: -5\n", &[][..]),
        ] {
            let (key, message) = invalid(text, vars);
            assert_eq!(key, "protocol.port");
            assert_eq!(
                message,
                "-5 is negative: this setting takes a whole number of 0 or more"
            );
        }
        let (_, message) = invalid("", &[("RPC_PROTOCOL__PORT", "five")]);
        assert!(message.contains("\"five\""), "{message}");
    }

    #[test]
    fn a_size_refused_in_decimal_units_says_what_it_was_read_as() {
        let (key, message) = invalid("consumer:\n  initial_stream_window_size: 64KB\n", &[]);
        assert_eq!(key, "consumer.initial_stream_window_size");
        assert!(
            message.ends_with(
                "; `64KB` is 64000 bytes: K, M and G count in 1000s, Ki, Mi and Gi in 1024s \
                 (`64KiB`)"
            ),
            "{message}"
        );
        let variable = [("RPC_PROTOCOL__INITIAL_STREAM_WINDOW_SIZE", "60 kb")];
        let (_, message) = invalid("", &variable);
        assert!(message.contains("`60 kb` is 60000 bytes"), "{message}");
        assert!(message.ends_with("(`60KiB`)"), "{message}");
        // A bare `k` is a decimal unit too (helper-24), and the key checked against is
        // read the same way: a stream window of `16MB` above an 8 MiB connection window.
        let (_, message) = invalid("consumer:\n  initial_stream_window_size: 64k\n", &[]);
        assert!(message.ends_with("(`64KiB`)"), "{message}");
        let (key, message) = invalid(
            "consumer:\n  initial_stream_window_size: 16MB\n  \
             initial_connection_window_size: 8MiB\n",
            &[],
        );
        assert_eq!(key, "consumer.initial_connection_window_size");
        assert!(
            message.contains("`16MB` is 16000000 bytes") && message.ends_with("(`16MiB`)"),
            "{message}"
        );
        // Binary units and plain numbers are read as written, a duration is no size:
        // nothing to add.
        for (key, value) in [
            ("initial_stream_window_size", "60KiB"),
            ("initial_stream_window_size", "61440"),
            ("keepalive_timeout", "0m"),
            ("keepalive_timeout", "0k"),
        ] {
            let text = format!("consumer:\n  {key}: {value}\n");
            let (_, message) = invalid(&text, &[]);
            assert!(!message.contains("count in 1000s"), "{value}: {message}");
        }
    }

    #[test]
    fn so_does_one_from_the_environment() {
        let (key, message) = invalid(
            "",
            &[("RPC_CONSUMER__REFERENCES__A.B__COMPRESSION", "brotli")],
        );
        assert_eq!(key, "consumer.references.a.b.compression");
        assert!(
            message.contains("`brotli`")
                && message.contains("`gzip`")
                && message.contains("`zstd`"),
            "{message}"
        );
    }
}
