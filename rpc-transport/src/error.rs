//! Transport errors.

use std::net::SocketAddr;

/// Errors of binding a listener or dialling an instance.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The listener could not be bound, typically because the port is in use
    /// (`source.kind() == AddrInUse`).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A TLS file cannot be used (see [`TlsError`](super::TlsError)).
    #[error(transparent)]
    Tls(#[from] super::TlsError),
    /// A server option is out of its range (see [`ServerOptions`](super::ServerOptions)).
    #[error("server option `{option}`: {reason}")]
    InvalidOption {
        /// The option's field name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A channel option is out of its range (see
    /// [`ChannelOptions::check`](super::ChannelOptions::check)).
    #[error("channel option `{option}`: {reason}")]
    InvalidChannelOption {
        /// The option's field name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An address or URI is malformed.
    #[error("invalid address `{addr}`: {reason}")]
    InvalidAddress {
        /// The address as given.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },
}
