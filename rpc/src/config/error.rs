//! The errors of reading a configuration: [`ConfigError`], what a user sees (it names the
//! file or variable and the key), and `KeyError`, what the source rewrites (environment
//! tree, spellings, dubbo-go layout) return before the sources merge, named with its file
//! once the file is known.

use std::path::PathBuf;

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

/// A key of one source that cannot be read as it is, before the sources merge.
#[derive(Debug)]
pub(super) struct KeyError {
    /// The dotted key.
    pub(super) key: String,
    /// What is wrong.
    pub(super) message: String,
    /// Where its value came from, if not the file: `environment variable RPC_...`.
    pub(super) origin: Option<String>,
}

impl KeyError {
    /// The error, coming from `file` unless it came from a variable.
    pub(super) fn named(self, file: &str) -> ConfigError {
        ConfigError::Invalid {
            origin: self.origin.unwrap_or_else(|| file.to_owned()),
            key: self.key,
            message: self.message,
        }
    }
}
