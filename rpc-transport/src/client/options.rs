//! Dial one instance: a lazily-connected tonic channel.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use super::{ClientTls, TransportError};

/// Settings of the channel to one instance.
#[derive(Clone, Debug)]
pub struct ChannelOptions {
    /// Bound on establishing the TCP connection. Default 1 s: on loopback or in a data
    /// centre a dial that takes longer is failing, and a quick error lets failover act.
    pub connect_timeout: Duration,
    /// Interval of HTTP/2 keep-alive PINGs; `None` (default) sends none.
    pub http2_keepalive_interval: Option<Duration>,
    /// Requests a channel may queue while (re)connecting. Default 1024 (tonic's).
    pub buffer_size: usize,
    /// TLS: dial providers over HTTPS and verify them with these settings. Default
    /// none (plain HTTP/2).
    pub tls: Option<ClientTls>,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            http2_keepalive_interval: None,
            buffer_size: 1024,
            tls: None,
        }
    }
}

/// A channel to `authority` (`host:port`) that connects on first use and reconnects after
/// a failure. Must be called within a tokio runtime (the channel owns a background task).
///
/// With [`ChannelOptions::tls`], the channel speaks HTTPS and its TLS files are read
/// now (so a channel made after a rotation uses the new files).
///
/// # Errors
/// [`TransportError::InvalidAddress`] when `authority` does not form a valid URI;
/// [`TransportError::Tls`] when a TLS file cannot be used.
pub fn connect_lazy(authority: &str, options: &ChannelOptions) -> Result<Channel, TransportError> {
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let invalid = |reason: String| TransportError::InvalidAddress {
        addr: authority.to_owned(),
        reason,
    };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{authority}"))
        .map_err(|error| invalid(error.to_string()))?;
    if let Some(tls) = &options.tls {
        endpoint = endpoint
            .tls_config(tls.tonic_config()?)
            .map_err(|error| invalid(error.to_string()))?;
    }
    Ok(endpoint
        .tcp_nodelay(true)
        .connect_timeout(options.connect_timeout)
        .http2_keep_alive_interval_opt(options.http2_keepalive_interval)
        .buffer_size(options.buffer_size)
        .connect_lazy())
}

trait KeepAliveExt {
    fn http2_keep_alive_interval_opt(self, interval: Option<Duration>) -> Self;
}

impl KeepAliveExt for Endpoint {
    fn http2_keep_alive_interval_opt(self, interval: Option<Duration>) -> Self {
        match interval {
            Some(interval) => self.http2_keep_alive_interval(interval),
            None => self,
        }
    }
}
