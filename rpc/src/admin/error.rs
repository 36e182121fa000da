//! Why the admin endpoint could not start. Each message names the key to change.

use std::net::SocketAddr;

/// Why the admin endpoint could not start (start-up fails with it, undone).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// `admin.host` or `admin.token` breaks a rule (see
    /// [`AdminConfig::bind_addr`](super::AdminConfig::bind_addr)).
    #[error("key `{key}`: {message}")]
    Invalid {
        /// `admin.host` or `admin.token`.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The port is taken by another process (or another application in this one).
    #[error(
        "key `admin.port`: {addr} is already in use; choose another admin.port (0 for any \
         free port) or set admin.enabled: false"
    )]
    PortInUse {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Another failure to listen (permission, address not available, ...).
    #[error("key `admin.port`: cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The bound listener could not be handed to the runtime.
    #[error("admin endpoint: cannot serve its listener: {0}")]
    Serve(std::io::Error),
}
