//! The choices of an enum setting, for the error of a value that is none of them.
//!
//! The `config` crate's deserializer says only "enum ClusterKind does not have variant
//! constructor failfst"; serde's own message, "unknown variant `failfst`, expected one
//! of `failover`, `failfast`, …", lists what the key takes. serde_json's deserializer
//! passes serde's message through, so the same tree is read again through it.

use super::Config;

/// The `config` crate's words for a value that is no variant of its enum.
const NO_SUCH_VARIANT: &str = "does not have variant constructor";

/// For an error at `key` that names no choices: serde's message with the choices, if
/// reading `merged` through serde_json fails at the same key with it.
pub(super) fn with_choices(merged: &config::Value, key: &str, message: &str) -> Option<String> {
    if !message.contains(NO_SUCH_VARIANT) {
        return None;
    }
    let tree = merged.clone().try_deserialize::<serde_json::Value>().ok()?;
    let error = serde_path_to_error::deserialize::<_, Config>(tree).err()?;
    let listed = error.inner().to_string();
    (error.path().to_string() == key && listed.starts_with("unknown variant")).then_some(listed)
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
