//! `protocol`: where this application's providers listen, and the limits that keep one
//! peer from hurting the others (see `lossless_rpc::transport::ServerOptions` for what each
//! HTTP/2 limit guards against, and `lossless_rpc::transport::MessageLimits` for the
//! message sizes).

use std::time::Duration;

use rpc_transport::{
    DEFAULT_CONNECTION_WINDOW_SIZE, DEFAULT_IDLE_TIMEOUT, DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_KEEPALIVE_TIMEOUT, DEFAULT_LISTEN_BACKLOG, DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_HEADER_LIST_SIZE, DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS, DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS, DEFAULT_PREFACE_TIMEOUT, DEFAULT_STREAM_WINDOW_SIZE,
    DEFAULT_TCP_USER_TIMEOUT, MessageLimits, ServerOptions, ServerTlsFiles, TransportError,
};
use serde::{Deserialize, Serialize};

use rpc_core::byte_size;

/// `protocol`: the listener of this application's providers.
///
/// Sizes are a number of bytes or a size with a unit (`4 MiB`, `16KiB`); durations are
/// human-readable (`20s`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ProtocolConfig {
    /// Protocol name; `tri` (Dubbo's Triple, gRPC-compatible) and `grpc` both mean gRPC
    /// over HTTP/2. Default `tri`.
    pub name: String,
    /// IP to bind. Default `127.0.0.1`; use a wildcard (`0.0.0.0`, `::`) to serve other
    /// hosts: the address registered is then found as `advertise_host` says.
    pub host: String,
    /// Port to bind; 0 picks a free one (consumers find it through the registry).
    /// Default 0.
    pub port: u16,
    /// Host consumers dial. Default: `host` when it is a specific address; for a
    /// wildcard, the address of the interface that routes to the first network registry,
    /// else the first non-loopback address of an interface that is up, else loopback
    /// (with a warning). The choice and its reason are logged at start-up. Set it when
    /// consumers must dial another address or name (NAT, a Kubernetes Service per pod).
    #[serde(alias = "advertise-host")]
    pub advertise_host: Option<String>,
    /// Streams one connection may have open at once; at least 1. Default 200.
    #[serde(alias = "max-concurrent-streams")]
    pub max_concurrent_streams: u32,
    /// Largest header list of a request, in bytes; at least 1 KiB. Default 16 KiB.
    #[serde(with = "byte_size", alias = "max-header-list-size")]
    pub max_header_list_size: u32,
    /// Flow-control window of each stream, in bytes: request bytes a client may send on
    /// one stream before its handler reads them; 65 535 (the protocol's initial
    /// window) to 2 GiB − 1. Default 1 MiB (hyper's).
    #[serde(with = "byte_size", alias = "initial-stream-window-size")]
    pub initial_stream_window_size: u32,
    /// Flow-control window of a whole connection, in bytes: request bytes a client may
    /// send on all its streams before handlers read them; from the stream window to
    /// 2 GiB − 1. Default 8 MiB, eight stream windows: handlers that do not read their
    /// uploads hold a stream window each, and the rest of the connection goes on (see
    /// `lossless_rpc::transport::DEFAULT_CONNECTION_WINDOW_SIZE`). The stream window
    /// (hyper's and tonic's default) keeps less in memory with large messages, and
    /// lets one such handler stop every upload on the connection.
    #[serde(with = "byte_size", alias = "initial-connection-window-size")]
    pub initial_connection_window_size: u32,
    /// Largest request message read, in bytes; at least 1. Default 4 MiB (gRPC's).
    /// Dubbo-go's `max-server-recv-msg-size` is an alias.
    #[serde(
        with = "byte_size",
        alias = "max-decoding-message-size",
        alias = "max-server-recv-msg-size"
    )]
    pub max_decoding_message_size: usize,
    /// Largest response message sent, in bytes; at least 1. Default 4 MiB (what gRPC
    /// clients accept by default). Dubbo-go's `max-server-send-msg-size` is an alias.
    #[serde(
        with = "byte_size",
        alias = "max-encoding-message-size",
        alias = "max-server-send-msg-size"
    )]
    pub max_encoding_message_size: usize,
    /// Interval of HTTP/2 keep-alive PINGs to each peer: one is sent when nothing
    /// arrived from it for this long, so a dead or paused peer is found within
    /// interval + `keepalive_timeout`. `0s` (or null) sends none. Default 30 s (see
    /// `lossless_rpc::transport::DEFAULT_KEEPALIVE_INTERVAL` for why).
    #[serde(with = "humantime_serde::option", alias = "keepalive-interval")]
    pub keepalive_interval: Option<Duration>,
    /// How long a keep-alive PING may go unanswered before the connection is closed;
    /// more than 0. Default 10 s.
    #[serde(with = "humantime_serde", alias = "keepalive-timeout")]
    pub keepalive_timeout: Duration,
    /// Bound from accept to the HTTP/2 client preface (after the TLS handshake, with
    /// TLS): a connection whose peer has not sent it by then is closed; more than 0.
    /// Default 10 s (see `lossless_rpc::transport::DEFAULT_PREFACE_TIMEOUT`).
    #[serde(with = "humantime_serde", alias = "preface-timeout")]
    pub preface_timeout: Duration,
    /// A connection that carried no call for this long gets GOAWAY (our consumers dial
    /// again when they next call); `0s` keeps idle connections. Default 5 minutes (see
    /// `lossless_rpc::transport::DEFAULT_IDLE_TIMEOUT`).
    #[serde(with = "humantime_serde", alias = "idle-timeout")]
    pub idle_timeout: Duration,
    /// Most connections open at once; at least 1. At the limit a new connection sheds
    /// the oldest one that never sent the HTTP/2 preface, else the oldest idle one
    /// (GOAWAY), else it is closed itself. Default none: 7/8 of the process's
    /// open-files limit (`ulimit -n`; 896 of 1 024), read at start.
    #[serde(alias = "max-connections")]
    pub max_connections: Option<usize>,
    /// `TCP_USER_TIMEOUT` of every accepted connection (Linux): how long data sent may
    /// stay unacknowledged before the kernel drops the connection; `0s` leaves the
    /// kernel's default (about 15 minutes of retransmissions). Default 20 s.
    #[serde(with = "humantime_serde", alias = "tcp-user-timeout")]
    pub tcp_user_timeout: Duration,
    /// Connections the kernel completes and queues before the server accepts them
    /// (`listen` backlog; capped by `net.core.somaxconn`); at least 1. Default 1 024
    /// (see `lossless_rpc::transport::DEFAULT_LISTEN_BACKLOG`).
    #[serde(alias = "listen-backlog")]
    pub listen_backlog: u32,
    /// Streams a peer may reset before they were accepted before its connection is
    /// closed (`ENHANCE_YOUR_CALM`; the rapid-reset defence). Default 20.
    #[serde(alias = "max-pending-accept-reset-streams")]
    pub max_pending_accept_reset_streams: usize,
    /// Streams we may reset for a peer's protocol errors before its connection is
    /// closed. Default 1024.
    #[serde(alias = "max-local-error-reset-streams")]
    pub max_local_error_reset_streams: usize,
    /// TLS (HTTPS): `{ cert, key, client_ca, reload_interval }` — the certificate chain
    /// and key (PEM), the CA client certificates must chain to for mutual TLS (default
    /// none: clients are not asked), and how often the files are checked for a change
    /// (default 10 s; changed files are loaded for new connections). Default none:
    /// plain HTTP/2.
    pub tls: Option<ServerTlsFiles>,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        Self {
            name: "tri".to_owned(),
            host: "127.0.0.1".to_owned(),
            port: 0,
            advertise_host: None,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            initial_stream_window_size: DEFAULT_STREAM_WINDOW_SIZE,
            initial_connection_window_size: DEFAULT_CONNECTION_WINDOW_SIZE,
            max_decoding_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_encoding_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            keepalive_interval: Some(DEFAULT_KEEPALIVE_INTERVAL),
            keepalive_timeout: DEFAULT_KEEPALIVE_TIMEOUT,
            preface_timeout: DEFAULT_PREFACE_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: None,
            tcp_user_timeout: DEFAULT_TCP_USER_TIMEOUT,
            listen_backlog: DEFAULT_LISTEN_BACKLOG,
            max_pending_accept_reset_streams: DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS,
            max_local_error_reset_streams: DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS,
            tls: None,
        }
    }
}

/// The smallest header list limit accepted: below it, gRPC's own headers may not fit.
const MIN_HEADER_LIST_SIZE: u32 = 1 << 10;

impl ProtocolConfig {
    /// The HTTP/2 settings of the listener.
    pub fn server_options(&self) -> ServerOptions {
        let set = |duration: Duration| (!duration.is_zero()).then_some(duration);
        let mut options = ServerOptions::default();
        options.http2_keepalive_interval = self.keepalive_interval.and_then(set);
        options.http2_keepalive_timeout = self.keepalive_timeout;
        options.max_concurrent_streams = Some(self.max_concurrent_streams);
        options.max_header_list_size = self.max_header_list_size;
        options.initial_stream_window_size = self.initial_stream_window_size;
        options.initial_connection_window_size = self.initial_connection_window_size;
        options.max_pending_accept_reset_streams = self.max_pending_accept_reset_streams;
        options.max_local_error_reset_streams = self.max_local_error_reset_streams;
        options.tls = self.tls.clone();
        options.preface_timeout = self.preface_timeout;
        options.idle_timeout = set(self.idle_timeout);
        options.max_connections = self.max_connections;
        options.tcp_user_timeout = set(self.tcp_user_timeout);
        options.listen_backlog = self.listen_backlog;
        options
    }

    /// The message size limits of the listener's services.
    pub fn message_limits(&self) -> MessageLimits {
        MessageLimits {
            max_decoding_message_size: self.max_decoding_message_size,
            max_encoding_message_size: self.max_encoding_message_size,
        }
    }

    /// What the compression filters may hold of one message: the same limits, on
    /// the uncompressed size (a message decompressed past `max_decoding_message_size`
    /// is `RESOURCE_EXHAUSTED`; one over `max_encoding_message_size` goes uncompressed),
    /// on both sides, a reference's included.
    pub fn compression_limits(&self) -> rpc_filter::compression::CompressionLimits {
        rpc_filter::compression::CompressionLimits {
            max_decoding_message_size: self.max_decoding_message_size,
            max_encoding_message_size: self.max_encoding_message_size,
        }
    }

    /// Checks what serde cannot; the key (within `protocol`) and what is wrong.
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        if !matches!(self.name.as_str(), "tri" | "grpc") {
            return Err((
                "name",
                format!("`{}` is not a protocol: use `tri` or `grpc`", self.name),
            ));
        }
        if self.host.parse::<std::net::IpAddr>().is_err() {
            return Err((
                "host",
                format!("`{}` is not an IP address to bind", self.host),
            ));
        }
        let at_least = |key, value: u64, min: u64| {
            if value < min {
                Err((key, format!("{value} is less than {min}")))
            } else {
                Ok(())
            }
        };
        at_least(
            "max_concurrent_streams",
            self.max_concurrent_streams.into(),
            1,
        )?;
        at_least(
            "max_header_list_size",
            self.max_header_list_size.into(),
            MIN_HEADER_LIST_SIZE.into(),
        )?;
        // The windows' bounds are the transport's own (`ServerOptions::check`), whose
        // option names are these keys.
        if let Err(TransportError::InvalidOption { option, reason }) = self.server_options().check()
        {
            return Err((option, reason));
        }
        for (key, size) in [
            ("max_decoding_message_size", self.max_decoding_message_size),
            ("max_encoding_message_size", self.max_encoding_message_size),
        ] {
            at_least(key, size as u64, 1)?;
        }
        if self.keepalive_timeout.is_zero() {
            return Err(("keepalive_timeout", "must be more than 0".to_owned()));
        }
        if self.preface_timeout.is_zero() {
            return Err(("preface_timeout", "must be more than 0".to_owned()));
        }
        if let Some(max) = self.max_connections {
            at_least("max_connections", max as u64, 1)?;
        }
        at_least("listen_backlog", self.listen_backlog.into(), 1)?;
        if let Some(tls) = &self.tls {
            readable("tls.cert", Some(&tls.cert))?;
            readable("tls.key", Some(&tls.key))?;
            readable("tls.client_ca", tls.client_ca.as_ref())?;
            if tls.reload_interval.is_zero() {
                return Err(("tls.reload_interval", "must be more than 0".to_owned()));
            }
        }
        Ok(())
    }
}

/// Whether a TLS file named by `key` can be opened: checked with the configuration, so
/// that the error names the key (the certificate itself is read when the listener
/// binds).
pub(super) fn readable(
    key: &'static str,
    path: Option<&std::path::PathBuf>,
) -> Result<(), (&'static str, String)> {
    match path.map(std::fs::File::open) {
        Some(Err(error)) => Err((
            key,
            format!(
                "cannot read `{}`: {error}",
                path.map_or(String::new(), |p| p.display().to_string())
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
