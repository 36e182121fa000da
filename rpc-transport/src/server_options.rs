//! The HTTP/2 settings of an exported server, and the limits that keep one peer from
//! hurting the others.
//!
//! Each limit answers a known attack or accident with what the HTTP/2 specification
//! (RFC 9113) names for it, so every client understands the answer:
//!
//! | limit | guards against | a peer over it gets |
//! |---|---|---|
//! | `max_concurrent_streams` | one connection taking every handler; the rapid-reset flood (CVE-2023-44487): h2 counts a stream the peer reset until our handler lets go of it, so resets cannot outrun this bound | `REFUSED_STREAM` for the extra streams (gRPC clients retry those transparently) |
//! | `max_pending_accept_reset_streams` | the rapid-reset flood before streams reach a handler | `GOAWAY` `ENHANCE_YOUR_CALM` |
//! | `max_local_error_reset_streams` | a peer that makes us reset its streams over and over (RUSTSEC-2024-0003) | `GOAWAY` `ENHANCE_YOUR_CALM` |
//! | `max_header_list_size` | a header-list flood (large headers, the CONTINUATION flood CVE-2024-27316) | HTTP 431 on that stream; too many CONTINUATION frames: `GOAWAY` `ENHANCE_YOUR_CALM` |
//! | keep-alive | a peer that vanished without closing (a cable pulled, a NAT entry dropped) | the connection closed after `http2_keepalive_timeout` without a PING's answer |
//!
//! The values are hyper's defaults, written out here so that none of them silently
//! changes with a hyper release (hyper says its 200 streams "could change").

use std::time::Duration;

use hyper::server::conn::http2;

use super::ServerTlsFiles;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// Streams one connection may have open at once, by default: hyper's default, and twice
/// the 100 RFC 9113 (§6.5.2) recommends as a minimum.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 200;
/// Largest header list (decoded, in bytes, as RFC 9113 §6.5.2 counts it) accepted by
/// default: 16 KiB, hyper's default; gRPC's own headers take well under 1 KiB.
pub const DEFAULT_MAX_HEADER_LIST_SIZE: u32 = 16 << 10;
/// Streams the peer may reset before our server accepted them, by default, before the
/// connection is closed with `ENHANCE_YOUR_CALM`: h2's default, 20.
pub const DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;
/// Streams we may reset because of the peer's errors, by default, before the connection
/// is closed with `ENHANCE_YOUR_CALM`: hyper's default, 1024.
pub const DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;

/// HTTP/2 settings of an exported server (see the module documentation for what each
/// limit guards against). The defaults are hyper's, fixed here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// Interval of HTTP/2 keep-alive PINGs; `None` (default) sends none.
    pub http2_keepalive_interval: Option<Duration>,
    /// How long to wait for a keep-alive PING's acknowledgement before closing the
    /// connection. Default 20 s. Used only with `http2_keepalive_interval`.
    pub http2_keepalive_timeout: Duration,
    /// Streams one connection may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`);
    /// `None` for no limit, which leaves the rapid-reset defence to the other limits
    /// alone. Default [`DEFAULT_MAX_CONCURRENT_STREAMS`].
    pub max_concurrent_streams: Option<u32>,
    /// Largest header list accepted, in bytes (`SETTINGS_MAX_HEADER_LIST_SIZE`).
    /// Default [`DEFAULT_MAX_HEADER_LIST_SIZE`].
    pub max_header_list_size: u32,
    /// Streams the peer may reset before they were accepted, before the connection is
    /// closed. Default [`DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS`].
    pub max_pending_accept_reset_streams: usize,
    /// Streams we may reset because of the peer's protocol errors, before the
    /// connection is closed. Default [`DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS`].
    pub max_local_error_reset_streams: usize,
    /// Pause after a failed `accept` (e.g. too many open files) before trying again,
    /// so the loop does not spin. Default 50 ms.
    pub accept_error_backoff: Duration,
    /// TLS: serve HTTPS with these files (reloaded when they change). Default none
    /// (plain HTTP/2).
    pub tls: Option<ServerTlsFiles>,
    /// Bound on a connection's TLS handshake: a peer that has not finished it by then
    /// is disconnected. Default 10 s.
    pub tls_handshake_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            http2_keepalive_interval: None,
            http2_keepalive_timeout: Duration::from_secs(20),
            max_concurrent_streams: Some(DEFAULT_MAX_CONCURRENT_STREAMS),
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            max_pending_accept_reset_streams: DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS,
            max_local_error_reset_streams: DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS,
            accept_error_backoff: Duration::from_millis(50),
            tls: None,
            tls_handshake_timeout: Duration::from_secs(10),
        }
    }
}

impl ServerOptions {
    /// hyper's HTTP/2 connection builder with these settings.
    pub(crate) fn http2_builder(&self) -> http2::Builder<TokioExecutor> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .keep_alive_interval(self.http2_keepalive_interval)
            .keep_alive_timeout(self.http2_keepalive_timeout)
            .max_concurrent_streams(self.max_concurrent_streams)
            .max_header_list_size(self.max_header_list_size)
            .max_pending_accept_reset_streams(self.max_pending_accept_reset_streams)
            .max_local_error_reset_streams(self.max_local_error_reset_streams);
        builder
    }
}
