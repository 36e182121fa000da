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
//! | `preface_timeout` | a client that connects and never speaks (a port scan, a flood of silent connections, a half-open dial) | the socket closed (it began no HTTP/2, so there is nothing to GOAWAY) |
//! | `idle_timeout` | a client that keeps a connection it no longer uses | `GOAWAY` (graceful: our consumer dials again when it next calls) |
//! | `max_connections` | more connections than descriptors (`EMFILE`), which stops every accept | the oldest connection that never spoke is closed, else the oldest idle one gets `GOAWAY`; only when neither exists is the new one closed |
//! | keep-alive PINGs, `tcp_user_timeout` | a peer that vanished without closing (a cable pulled, a host blackholed, a paused VM or process) | the connection closed after `http2_keepalive_timeout` without a PING's answer, or after `tcp_user_timeout` with data unacknowledged |
//!
//! The HTTP/2 values are hyper's defaults, written out here so that none of them
//! silently changes with a hyper release (hyper says its 200 streams "could change"),
//! except the connection's flow-control window (see
//! [`DEFAULT_CONNECTION_WINDOW_SIZE`]) and keep-alive, which hyper leaves off.
//!
//! # Memory per connection
//!
//! What one peer can make a connection hold, at most, with the defaults:
//!
//! - request bytes received and not yet read by a handler: the connection's window,
//!   [`DEFAULT_CONNECTION_WINDOW_SIZE`] (8 MiB), at most [`DEFAULT_STREAM_WINDOW_SIZE`]
//!   (1 MiB) of it on one stream (h2 holds a stream's DATA until its handler reads it,
//!   and gives the window back only then);
//! - request messages being decoded: one per open stream, each at most
//!   `max_decoding_message_size` (4 MiB; `MessageLimits`): `max_concurrent_streams` ×
//!   4 MiB = 800 MiB;
//! - response messages being encoded: one per stream, each at most
//!   `max_encoding_message_size` (4 MiB): 800 MiB, and what h2 buffers of them before
//!   the socket takes it, [`DEFAULT_MAX_SEND_BUF_SIZE`] (400 KiB) per stream: 80 MiB;
//! - header lists: `max_header_list_size` (16 KiB) per stream: 3.2 MiB.
//!
//! So about 1.7 GiB in the worst case, which needs a peer that opens 200 streams and
//! sends each a 4 MiB message it never finishes; lower `max_concurrent_streams` or the
//! message sizes to lower it (the bound is linear in each). What a connection costs
//! when it carries nothing is far less: a silent one is a socket and a task, and the
//! connection limit bounds how many of them there are.

use std::time::Duration;

use hyper::server::conn::http2;

use super::windows::check_windows;
use super::{Network, ServerTlsFiles, TransportError};
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

/// Flow-control window of each stream (`SETTINGS_INITIAL_WINDOW_SIZE`): request bytes a
/// client may send on one stream before its handler reads them. 1 MiB, hyper's
/// default: a stream uploads at full speed on a path of up to 1 MiB in flight
/// (80 Mbit/s at 100 ms of round trip, 8 Gbit/s at 1 ms).
pub const DEFAULT_STREAM_WINDOW_SIZE: u32 = 1 << 20;
/// Flow-control window of the whole connection: request bytes a client may send on all
/// of its streams together before handlers read them. 8 MiB, eight stream windows —
/// not hyper's 1 MiB, one stream window.
///
/// h2 gives a connection's window back only as handlers read what they were sent, so
/// with a connection window no larger than a stream's, one handler that does not read
/// its client stream (busy, or waiting on something else first) holds the whole
/// window and every other upload on the connection stops, unary calls included. With
/// eight stream windows, seven such handlers still leave a full stream window to the
/// rest, and up to eight streams upload at full speed side by side; the cost is at
/// most 8 MiB of unread request bytes per connection (see the module documentation).
pub const DEFAULT_CONNECTION_WINDOW_SIZE: u32 = 8 * DEFAULT_STREAM_WINDOW_SIZE;
/// Largest frame a client may send (`SETTINGS_MAX_FRAME_SIZE`): 16 KiB, hyper's default
/// and the protocol's own initial value.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16 << 10;
/// Response bytes h2 buffers per stream before the socket takes them: 400 KiB, hyper's
/// default.
pub const DEFAULT_MAX_SEND_BUF_SIZE: usize = 400 << 10;

/// Default bound on a connection's first bytes: 10 s from accept to the whole HTTP/2
/// client preface (after the TLS handshake, with TLS).
///
/// Every HTTP/2 client sends its preface the moment it has connected (or finished TLS),
/// so a healthy peer needs one round trip, or a few with TLS. 10 s covers a handshake
/// that lost packets three times over (TCP retransmits after 1, 2 and 4 s) and equals
/// the TLS handshake's own bound. Floods of silent connections are answered by
/// `max_connections` (the silent ones are shed first), not by this timeout; it returns
/// each one's descriptor when no flood forces it earlier.
pub const DEFAULT_PREFACE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on a connection without a call: 5 minutes, then `GOAWAY`.
///
/// An rpc consumer keeps its connection to each provider and dials again, at the cost
/// of one handshake, when it next calls after a GOAWAY; a consumer that calls at least
/// once in 5 minutes never pays it. A client that is gone or no longer calls gives its
/// descriptor and buffers back within 5 to 10 minutes instead of holding them until the
/// process ends. grpc-go's and grpc-java's servers leave this off
/// (`MaxConnectionIdle` infinite); a flood of idle connections is answered sooner by
/// `max_connections`, which sheds idle connections when it must.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default interval of the server's keep-alive PINGs: 30 s without a frame from the
/// peer. hyper sends a PING only when nothing arrived for the interval, so a busy
/// connection sends none; an idle one costs a 17-byte frame each way per 30 s
/// (10 000 idle connections: 333 PINGs/s). gRPC's clients (grpc-go, grpc-java, C-core)
/// answer server PINGs and do not police them — their ping limits
/// (`PermitWithoutStream`, `MinTime` of 5 minutes) are on what servers accept from
/// clients — and 30 s is also well under the idle timeouts of NATs and load balancers
/// (350 s at AWS's NLB), which would otherwise drop a quiet connection silently.
pub const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// Default wait for a keep-alive PING's answer before the connection is closed: 10 s.
/// A live client answers within a round trip (milliseconds in a data center, 300 ms
/// around the world); a peer that has not answered in 10 s is gone or paused, and is
/// found within 40 s of its last frame (interval + timeout).
pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `TCP_USER_TIMEOUT` of every accepted socket (Linux): data we sent may stay
/// unacknowledged 20 s before the kernel drops the connection. Without it the kernel
/// retransmits for about 15 minutes (`tcp_retries2` = 15) to a peer that vanished while
/// we were sending — a response or a stream to a host that was blackholed — where
/// keep-alive PINGs cannot help (they only go out when nothing was received, and queue
/// behind the unacknowledged data). 20 s is gRPC's keep-alive timeout, which grpc-go
/// also sets as `TCP_USER_TIMEOUT` when keep-alive is on; a healthy peer acknowledges
/// within a round trip, and a network that drops everything for 20 s has lost the
/// connection's calls to their deadlines anyway.
pub const DEFAULT_TCP_USER_TIMEOUT: Duration = Duration::from_secs(20);
/// Share of the process's descriptor limit (`RLIMIT_NOFILE`, soft) that connections may
/// take when `max_connections` is not set: 7/8, leaving 1/8 (128 of Linux's usual
/// 1 024) for everything else the process opens — its listeners, registry sessions,
/// its own consumers' connections, the admin endpoint, log files.
const CONNECTION_SHARE_OF_DESCRIPTORS: (usize, usize) = (7, 8);
/// `max_connections` when the descriptor limit cannot be read, or is unlimited.
const FALLBACK_MAX_CONNECTIONS: usize = 10_000;

/// Connections the kernel keeps completed for the accept loop (`listen`'s backlog;
/// the kernel caps it at `net.core.somaxconn`, 4 096 on Linux since 5.4). The standard
/// library's 128 drops the SYNs of a burst past it, and each dropped client waits for
/// its retransmission, 1 s and then longer: measured, 1 100 connections opened one
/// after another at a provider took 5.4–7.3 s with 128, where a
/// roll's reconnecting consumers need them in milliseconds. 1 024 as Go's net package
/// (which asks `somaxconn`) and tokio's examples.
pub const DEFAULT_LISTEN_BACKLOG: u32 = 1024;

/// HTTP/2 settings of an exported server (see the module documentation for what each
/// limit guards against, and what one connection may hold in memory).
///
/// Built from [`ServerOptions::default`] and changed field by field (the struct is
/// `#[non_exhaustive]`, so new limits can be added without breaking its users).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Interval of HTTP/2 keep-alive PINGs: one is sent when nothing arrived from the
    /// peer for this long; `None` sends none. Default [`DEFAULT_KEEPALIVE_INTERVAL`]
    /// (30 s).
    pub http2_keepalive_interval: Option<Duration>,
    /// How long to wait for a keep-alive PING's acknowledgement before closing the
    /// connection. Default [`DEFAULT_KEEPALIVE_TIMEOUT`] (10 s). Used only with
    /// `http2_keepalive_interval`.
    pub http2_keepalive_timeout: Duration,
    /// Streams one connection may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`);
    /// `None` for no limit, which leaves the rapid-reset defence to the other limits
    /// alone. Default [`DEFAULT_MAX_CONCURRENT_STREAMS`].
    pub max_concurrent_streams: Option<u32>,
    /// Largest header list accepted, in bytes (`SETTINGS_MAX_HEADER_LIST_SIZE`).
    /// Default [`DEFAULT_MAX_HEADER_LIST_SIZE`].
    pub max_header_list_size: u32,
    /// Flow-control window of each stream, in bytes (`SETTINGS_INITIAL_WINDOW_SIZE`):
    /// request bytes a client may send on one stream before its handler reads them.
    /// Default [`DEFAULT_STREAM_WINDOW_SIZE`] (1 MiB). Values from 65 535 to
    /// 2³¹ − 1 are meaningful (the protocol's own bounds).
    pub initial_stream_window_size: u32,
    /// Flow-control window of the whole connection, in bytes: request bytes a client
    /// may send on all of its streams together before handlers read them. Default
    /// [`DEFAULT_CONNECTION_WINDOW_SIZE`] (8 MiB, eight stream windows, so that
    /// handlers that do not read their uploads do not stop the rest); set it to the
    /// stream window for hyper's and tonic's default, which moves large messages with
    /// less memory in flight and lets one such handler stop the connection.
    pub initial_connection_window_size: u32,
    /// Streams the peer may reset before they were accepted, before the connection is
    /// closed. Default [`DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS`].
    pub max_pending_accept_reset_streams: usize,
    /// Streams we may reset because of the peer's protocol errors, before the
    /// connection is closed. Default [`DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS`].
    pub max_local_error_reset_streams: usize,
    /// Pause after a failed `accept` that shedding a connection cannot cure (nothing to
    /// shed, or another error), so the loop does not spin. Default 50 ms.
    pub accept_error_backoff: Duration,
    /// TLS: serve HTTPS with these files (reloaded when they change). Default none
    /// (plain HTTP/2).
    pub tls: Option<ServerTlsFiles>,
    /// Bound on a connection's TLS handshake: a peer that has not finished it by then
    /// is disconnected. Default 10 s.
    pub tls_handshake_timeout: Duration,
    /// Bound from accept to the complete HTTP/2 client preface (24 bytes; with TLS, the
    /// handshake and then the preface): a connection whose peer has not sent it by
    /// then is closed, and counted in [`ConnectionCounts::preface_timeouts`]. Default
    /// [`DEFAULT_PREFACE_TIMEOUT`] (10 s).
    ///
    /// [`ConnectionCounts::preface_timeouts`]: super::ConnectionCounts::preface_timeouts
    pub preface_timeout: Duration,
    /// A connection that has carried no call for this long gets the graceful close
    /// (`GOAWAY`), as at shutdown; `None` keeps idle connections open. The timer starts
    /// when the connection's last call ends (a call counts until its response has
    /// ended), and is checked once per period, so an idle connection closes between
    /// one and two periods after its last call. Default [`DEFAULT_IDLE_TIMEOUT`]
    /// (5 minutes).
    pub idle_timeout: Option<Duration>,
    /// Most connections open at once on this server. A connection accepted at the
    /// limit makes room: the oldest connection whose peer has not sent its preface is
    /// closed, else the oldest with no call in flight gets `GOAWAY` and is closed; only
    /// when every connection carries a call is the new one closed. `None` (default):
    /// 7/8 of the process's descriptor limit (`RLIMIT_NOFILE`, soft; 896 of 1 024),
    /// read when the server starts; 10 000 when that limit cannot be read or is
    /// unlimited. See [`ServerOptions::connection_limit`].
    pub max_connections: Option<usize>,
    /// `TCP_USER_TIMEOUT` of every accepted socket (Linux; ignored elsewhere): how long
    /// data we sent may stay unacknowledged before the kernel drops the connection.
    /// `None` or zero leaves the kernel's default (retransmissions for about 15
    /// minutes). Default [`DEFAULT_TCP_USER_TIMEOUT`] (20 s).
    pub tcp_user_timeout: Option<Duration>,
    /// `listen` backlog of a TCP listener: connections the kernel completes and queues
    /// before the accept loop takes them (capped by `net.core.somaxconn`). Default
    /// [`DEFAULT_LISTEN_BACKLOG`] (1 024).
    pub listen_backlog: u32,
    /// Listen on this stack instead of the operating system's TCP (a simulated network;
    /// see [`NetworkStack`](crate::NetworkStack)). Default none (TCP). Such a listener
    /// cannot be handed to a hot upgrade's successor.
    pub network: Option<Network>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            http2_keepalive_interval: Some(DEFAULT_KEEPALIVE_INTERVAL),
            http2_keepalive_timeout: DEFAULT_KEEPALIVE_TIMEOUT,
            max_concurrent_streams: Some(DEFAULT_MAX_CONCURRENT_STREAMS),
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            initial_stream_window_size: DEFAULT_STREAM_WINDOW_SIZE,
            initial_connection_window_size: DEFAULT_CONNECTION_WINDOW_SIZE,
            max_pending_accept_reset_streams: DEFAULT_MAX_PENDING_ACCEPT_RESET_STREAMS,
            max_local_error_reset_streams: DEFAULT_MAX_LOCAL_ERROR_RESET_STREAMS,
            accept_error_backoff: Duration::from_millis(50),
            tls: None,
            tls_handshake_timeout: Duration::from_secs(10),
            preface_timeout: DEFAULT_PREFACE_TIMEOUT,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_connections: None,
            tcp_user_timeout: Some(DEFAULT_TCP_USER_TIMEOUT),
            listen_backlog: DEFAULT_LISTEN_BACKLOG,
            network: None,
        }
    }
}

impl ServerOptions {
    /// The connection limit in force: `max_connections`, or when it is `None`, 7/8 of
    /// the process's soft descriptor limit now (10 000 when it cannot be read or is
    /// unlimited). At least 1.
    pub fn connection_limit(&self) -> usize {
        self.max_connections
            .unwrap_or_else(|| share_of_descriptors(descriptor_limit()))
            .max(1)
    }

    /// Checks what the protocol bounds: each flow-control window from
    /// [`MIN_WINDOW_SIZE`](crate::MIN_WINDOW_SIZE) to
    /// [`MAX_WINDOW_SIZE`](crate::MAX_WINDOW_SIZE), the connection's no smaller than a
    /// stream's. [`Server::bind`](crate::Server::bind) checks this first.
    ///
    /// # Errors
    /// [`TransportError::InvalidOption`] naming the first field out of its range.
    pub fn check(&self) -> Result<(), TransportError> {
        check_windows(
            self.initial_stream_window_size,
            self.initial_connection_window_size,
            |option, reason| TransportError::InvalidOption { option, reason },
        )
    }

    /// hyper's HTTP/2 connection builder with these settings.
    pub(crate) fn http2_builder(&self) -> http2::Builder<TokioExecutor> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .initial_stream_window_size(self.initial_stream_window_size)
            .initial_connection_window_size(self.initial_connection_window_size)
            .max_frame_size(DEFAULT_MAX_FRAME_SIZE)
            .max_send_buf_size(DEFAULT_MAX_SEND_BUF_SIZE)
            .keep_alive_interval(self.http2_keepalive_interval)
            .keep_alive_timeout(self.http2_keepalive_timeout)
            .max_concurrent_streams(self.max_concurrent_streams)
            .max_header_list_size(self.max_header_list_size)
            .max_pending_accept_reset_streams(self.max_pending_accept_reset_streams)
            .max_local_error_reset_streams(self.max_local_error_reset_streams);
        builder
    }
}

/// The soft `RLIMIT_NOFILE` of this process; `None` when it cannot be read or is
/// unlimited.
fn descriptor_limit() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _hard)) if soft != RLIM_INFINITY => Some(soft),
        _ => None,
    }
}

/// The connections a descriptor limit of `limit` leaves room for.
fn share_of_descriptors(limit: Option<u64>) -> usize {
    let (part, whole) = CONNECTION_SHARE_OF_DESCRIPTORS;
    match limit.and_then(|limit| usize::try_from(limit).ok()) {
        Some(limit) => limit / whole * part + limit % whole * part / whole,
        None => FALLBACK_MAX_CONNECTIONS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_leaves_an_eighth_of_the_descriptors() {
        assert_eq!(share_of_descriptors(Some(1024)), 896);
        assert_eq!(share_of_descriptors(Some(20_000)), 17_500);
        assert_eq!(share_of_descriptors(Some(1_048_576)), 917_504);
        assert_eq!(share_of_descriptors(None), FALLBACK_MAX_CONNECTIONS);
        let options = ServerOptions {
            max_connections: Some(0),
            ..ServerOptions::default()
        };
        assert_eq!(options.connection_limit(), 1);
        assert!(ServerOptions::default().connection_limit() >= 1);
    }
}
