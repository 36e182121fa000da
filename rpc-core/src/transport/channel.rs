//! Dial one instance: a lazily-connected tonic channel.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use super::TransportError;

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
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            http2_keepalive_interval: None,
            buffer_size: 1024,
        }
    }
}

/// A channel to `authority` (`host:port`) that connects on first use and reconnects after
/// a failure. Must be called within a tokio runtime (the channel owns a background task).
///
/// # Errors
/// [`TransportError::InvalidAddress`] when `authority` does not form a valid URI.
pub fn connect_lazy(authority: &str, options: &ChannelOptions) -> Result<Channel, TransportError> {
    let endpoint = Endpoint::from_shared(format!("http://{authority}")).map_err(|error| {
        TransportError::InvalidAddress {
            addr: authority.to_owned(),
            reason: error.to_string(),
        }
    })?;
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
