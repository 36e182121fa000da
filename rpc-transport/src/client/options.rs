//! Settings of the consumer's connection to one instance.

use std::time::Duration;

use crate::windows::check_windows;
use crate::{ClientTls, Network, TransportError};

/// Default [`ChannelOptions::http2_keepalive_interval`]: 20 s.
pub const DEFAULT_CLIENT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);
/// Default [`ChannelOptions::http2_idle_keepalive_interval`]: 60 s.
pub const DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
/// Default [`ChannelOptions::http2_keepalive_timeout`]: 10 s.
pub const DEFAULT_CLIENT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`ChannelOptions::probe_timeout`]: 1 s.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Default [`ChannelOptions::tcp_user_timeout`]: 20 s.
pub const DEFAULT_CLIENT_TCP_USER_TIMEOUT: Duration = Duration::from_secs(20);
/// Default [`ChannelOptions::initial_stream_window_size`]: 2 MiB, as hyper's client
/// (and so tonic's channel) has it.
pub const DEFAULT_CLIENT_STREAM_WINDOW_SIZE: u32 = 2 << 20;
/// Default [`ChannelOptions::initial_connection_window_size`]: 256 MiB, 128 stream
/// windows (Envoy's default), not hyper's 5 MiB.
///
/// With hyper's 5 MiB, three streams whose readers paused held the whole window and
/// every other call on the connection stalled until it timed out; now it takes 128.
/// Memory is bounded by the stream windows, not by this: what a provider may send and
/// nobody has read is at most one stream window per paused stream.
pub const DEFAULT_CLIENT_CONNECTION_WINDOW_SIZE: u32 = 128 * DEFAULT_CLIENT_STREAM_WINDOW_SIZE;

/// Settings of the connection to one instance.
///
/// Built from [`ChannelOptions::default`] and changed field by field (it grows: a
/// struct literal would break when a field is added).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChannelOptions {
    /// Bound on establishing a connection: TCP, the TLS handshake and the HTTP/2
    /// preface together. Default 1 s: on loopback or in a data centre a dial that takes
    /// longer is failing, and a quick error lets failover act.
    pub connect_timeout: Duration,
    /// While calls are open on a connection, a keep-alive PING is sent once nothing has
    /// been heard from the peer for this long; `None` sends none. Default
    /// [`DEFAULT_CLIENT_KEEPALIVE_INTERVAL`] (20 s). A busy connection never pings: anything the
    /// peer sends counts. It is what finds a dead peer under a long, quiet stream; a
    /// call still waiting for its answer is watched more closely (see
    /// [`SendReport::probe`](crate::SendReport::probe)).
    ///
    /// grpc-go and grpc-java servers allow a client one PING per 5 minutes while they
    /// send nothing, and close the connection with `GOAWAY ENHANCE_YOUR_CALM` after
    /// three more: for references to such servers with streams quiet for minutes, set
    /// 5 minutes. Our own providers and Dubbo's accept any rate.
    pub http2_keepalive_interval: Option<Duration>,
    /// On a connection with no call open, a keep-alive PING is sent once nothing has
    /// been heard from the peer for this long; `None` sends none. Default
    /// [`DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL`] (60 s): an idle connection to a host that
    /// vanished is found before a call is sent into it, at a rate no peer minds
    /// (grpc-go answers idle pings more often than every 2 hours with a GOAWAY after
    /// the third, which costs an idle connection and nothing else: the next call dials
    /// again).
    pub http2_idle_keepalive_interval: Option<Duration>,
    /// How long a keep-alive PING may wait for its answer before the connection is
    /// closed (unless frames arrived meanwhile). Default [`DEFAULT_CLIENT_KEEPALIVE_TIMEOUT`]
    /// (10 s). The calls still open on a connection closed this way fail over.
    pub http2_keepalive_timeout: Duration,
    /// How long the PING that checks a connection whose call is overdue may wait for its
    /// answer before the connection is closed. Default [`DEFAULT_PROBE_TIMEOUT`] (1 s):
    /// a live peer answers a PING from its connection task, without its handlers, in
    /// well under a millisecond on a data-centre network (also measured under full load
    /// in the lab: docs/faults.md, "Across hosts"), so 1 s closes nothing that lives,
    /// and the instance takes no new call while its PING is out anyway.
    pub probe_timeout: Duration,
    /// `TCP_USER_TIMEOUT` of each connection's socket (Linux): data unacknowledged this
    /// long breaks the connection in the kernel. `None` leaves the kernel's default
    /// (about 15 minutes of retransmissions). Default [`DEFAULT_CLIENT_TCP_USER_TIMEOUT`] (20
    /// s): a backstop under the PINGs for a peer whose host vanished while this end was
    /// writing to it.
    pub tcp_user_timeout: Option<Duration>,
    /// HTTP/2 connections to each instance; calls take them in turn. Default 1. h2 writes
    /// one connection's streams under one lock (hyperium/h2#531), so at high
    /// concurrency more than one may carry more; each also costs the provider a
    /// connection. Values below 1 count as 1.
    pub connections_per_instance: usize,
    /// Flow-control window of each stream (`SETTINGS_INITIAL_WINDOW_SIZE`), in bytes:
    /// response bytes a provider may send on one call before its caller reads them.
    /// From [`MIN_WINDOW_SIZE`](crate::MIN_WINDOW_SIZE) to
    /// [`MAX_WINDOW_SIZE`](crate::MAX_WINDOW_SIZE). Default
    /// [`DEFAULT_CLIENT_STREAM_WINDOW_SIZE`] (2 MiB): a response arrives at full speed on
    /// a path of up to 2 MiB in flight.
    pub initial_stream_window_size: u32,
    /// Flow-control window of the whole connection, in bytes: response bytes providers
    /// may send on all of its calls together before their callers read them; from the
    /// stream window to [`MAX_WINDOW_SIZE`](crate::MAX_WINDOW_SIZE). Default
    /// [`DEFAULT_CLIENT_CONNECTION_WINDOW_SIZE`] (256 MiB). Smaller values (hyper's 5 MiB)
    /// keep less unread response data per connection and cost less memory at large
    /// messages (docs/benchmarks.md, "The 1 MiB row"), at the price of calls stalled
    /// behind a few callers that stopped reading.
    pub initial_connection_window_size: u32,
    /// TLS: dial providers over HTTPS and verify them with these settings, read from
    /// their files at each dial. Default none (plain HTTP/2).
    pub tls: Option<ClientTls>,
    /// Dial through this stack instead of the operating system's TCP (a simulated
    /// network; see [`NetworkStack`](crate::NetworkStack)). Default none (TCP).
    pub network: Option<Network>,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            http2_keepalive_interval: Some(DEFAULT_CLIENT_KEEPALIVE_INTERVAL),
            http2_idle_keepalive_interval: Some(DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL),
            http2_keepalive_timeout: DEFAULT_CLIENT_KEEPALIVE_TIMEOUT,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            tcp_user_timeout: Some(DEFAULT_CLIENT_TCP_USER_TIMEOUT),
            connections_per_instance: 1,
            initial_stream_window_size: DEFAULT_CLIENT_STREAM_WINDOW_SIZE,
            initial_connection_window_size: DEFAULT_CLIENT_CONNECTION_WINDOW_SIZE,
            tls: None,
            network: None,
        }
    }
}

impl ChannelOptions {
    /// Checks what the protocol bounds: each flow-control window from
    /// [`MIN_WINDOW_SIZE`](crate::MIN_WINDOW_SIZE) to
    /// [`MAX_WINDOW_SIZE`](crate::MAX_WINDOW_SIZE), the connection's no smaller than a
    /// stream's. [`connect_lazy`](crate::connect_lazy) checks this first, and an
    /// application's start-up before it starts anything.
    ///
    /// # Errors
    /// [`TransportError::InvalidChannelOption`] naming the first field out of its range.
    pub fn check(&self) -> Result<(), TransportError> {
        check_windows(
            self.initial_stream_window_size,
            self.initial_connection_window_size,
            |option, reason| TransportError::InvalidChannelOption { option, reason },
        )
    }
}

/// HTTP/2 settings of every connection that are not options.
pub(super) mod http2 {
    /// Largest frame this end accepts: 16 KiB (the protocol's default).
    pub(crate) const MAX_FRAME_SIZE: u32 = 16 * 1024;
    /// Largest header list this end accepts: 16 KiB.
    pub(crate) const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;
    /// Bytes buffered per stream for sending: 1 MiB.
    pub(crate) const MAX_SEND_BUFFER: usize = 1024 * 1024;
    /// Streams this end may open before the peer's SETTINGS say how many: 100.
    pub(crate) const INITIAL_MAX_SEND_STREAMS: usize = 100;
}
