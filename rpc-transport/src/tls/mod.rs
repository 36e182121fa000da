//! TLS on both ends of the transport, with rustls (ring as the crypto provider, as
//! tonic's `tls-ring` feature).
//!
//! - **provider**: the accept loop hands each accepted socket to a tokio-rustls acceptor
//!   before HTTP/2 ([`ServerTlsFiles`]: certificate, key, and optionally the CA client
//!   certificates must chain to, for mutual TLS). The files are reloaded when they change,
//!   without touching established connections (`reload.rs` says how and why by polling).
//! - **consumer**: a tokio-rustls connector on each dial ([`ClientTls`]: the CA, the expected name, and a
//!   client certificate for mutual TLS).
//!
//! Files: `files.rs` (PEM into a rustls configuration), `reload.rs` (the configuration
//! in force and its reload), `client.rs` (the consumer's settings).

mod client;
mod files;
mod reload;

use std::path::PathBuf;

pub use client::ClientTls;
pub use files::{DEFAULT_RELOAD_INTERVAL, ServerTlsFiles};
pub(crate) use reload::ServerTls;

/// A TLS file that cannot be used, or a configuration rustls refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file cannot be read, holds nothing usable, or does not go with another.
    #[error("TLS file {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}
