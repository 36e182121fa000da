//! Settings of the consumer's connection to one instance.

use std::time::Duration;

use crate::ClientTls;

/// Settings of the connection to one instance.
#[derive(Clone, Debug)]
pub struct ChannelOptions {
    /// Bound on establishing a connection: TCP, the TLS handshake and the HTTP/2
    /// preface together. Default 1 s: on loopback or in a data centre a dial that takes
    /// longer is failing, and a quick error lets failover act.
    pub connect_timeout: Duration,
    /// Interval of HTTP/2 keep-alive PINGs on an open connection; `None` (default) sends
    /// none. With it, a host that vanished without a reset (its link blackholed, its
    /// power cut) is found within `interval + keepalive_timeout`, and the calls in flight
    /// on it fail then instead of at their own timeouts.
    pub http2_keepalive_interval: Option<Duration>,
    /// How long a keep-alive PING may wait for its answer before the connection is
    /// closed. Default 20 s (hyper's); used only with `http2_keepalive_interval`.
    pub http2_keepalive_timeout: Duration,
    /// HTTP/2 connections to each instance; calls take them in turn. Default 1. h2 writes
    /// one connection's streams under one lock (hyperium/h2#531), so at high
    /// concurrency more than one may carry more; each also costs the provider a
    /// connection. Values below 1 count as 1.
    pub connections_per_instance: usize,
    /// TLS: dial providers over HTTPS and verify them with these settings. Default
    /// none (plain HTTP/2).
    pub tls: Option<ClientTls>,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            http2_keepalive_interval: None,
            http2_keepalive_timeout: Duration::from_secs(20),
            connections_per_instance: 1,
            tls: None,
        }
    }
}

/// HTTP/2 settings of every connection, as hyper's client (and so tonic's channel)
/// has them by default: they decide how much one call may have in flight.
pub(super) mod http2 {
    /// Initial connection flow-control window: 5 MiB.
    pub(crate) const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
    /// Initial stream flow-control window: 2 MiB.
    pub(crate) const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
    /// Largest frame this end accepts: 16 KiB (the protocol's default).
    pub(crate) const MAX_FRAME_SIZE: u32 = 16 * 1024;
    /// Largest header list this end accepts: 16 KiB.
    pub(crate) const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;
    /// Bytes buffered per stream for sending: 1 MiB.
    pub(crate) const MAX_SEND_BUFFER: usize = 1024 * 1024;
    /// Streams this end may open before the peer's SETTINGS say how many: 100.
    pub(crate) const INITIAL_MAX_SEND_STREAMS: usize = 100;
}
