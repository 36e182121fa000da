//! What a server's connections look like, counted: at one moment (for metrics), and
//! over its close (for the shutdown report).

/// What happened to the connections of a server from the start of its close (the first
/// of [`goaway_plain_clients_that_call`](super::ServerHandle::goaway_plain_clients_that_call),
/// [`goaway_plain_clients`](super::ServerHandle::goaway_plain_clients) and
/// [`shutdown`](super::ServerHandle::shutdown)) to the end of its `shutdown`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerShutdown {
    /// Connections that closed after the graceful GOAWAY exchange.
    pub closed_gracefully: usize,
    /// Connections closed by us with nothing in flight, without the end of the GOAWAY
    /// exchange: their peer did not answer its PING within 100 ms, or ignored the
    /// GOAWAY and kept the socket open. Nothing is lost by it.
    pub closed_idle: usize,
    /// Connections closed because the deadline passed first, with calls still on them.
    pub forced: usize,
    /// Connections closed at once because the peer had not begun HTTP/2 with us: it had
    /// not sent a byte, or (accepted during the shutdown) not a request.
    pub unused: usize,
    /// Calls (typically streams) still open at the bound, ended with `UNAVAILABLE`,
    /// "provider shut down before the stream ended" ([`super::CUT_AT_SHUTDOWN`]).
    pub streams_cut: usize,
}

/// What a server's connections look like at one moment, for metrics: how many are
/// open, and what closed them, counted since the server started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionCounts {
    /// Connections open now.
    pub open: usize,
    /// Connections that were sent the first GOAWAY of a graceful close: at shutdown,
    /// for idleness, or shed while idle (connections whose peer never spoke are closed
    /// without one).
    pub goaway_sent: u64,
    /// Connections closed because their peer had not sent the HTTP/2 preface within
    /// `preface_timeout`.
    pub preface_timeouts: u64,
    /// Connections sent GOAWAY because they carried no call for `idle_timeout`.
    pub idle_timeouts: u64,
    /// Connections closed to make room (at `max_connections`, or for a descriptor
    /// `accept` lacked) before their peer sent the preface.
    pub shed_never_spoken: u64,
    /// Connections with no call in flight sent GOAWAY and closed to make room.
    pub shed_idle: u64,
    /// New connections closed at once: the server was at `max_connections` and every
    /// connection carried a call.
    pub refused_at_limit: u64,
    /// `accept` failures for lack of a descriptor (`EMFILE`, `ENFILE`) or of socket
    /// memory: each one shed a connection, or backed off when none could be.
    pub descriptor_shortages: u64,
}

impl std::ops::Add for ConnectionCounts {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            open: self.open + other.open,
            goaway_sent: self.goaway_sent + other.goaway_sent,
            preface_timeouts: self.preface_timeouts + other.preface_timeouts,
            idle_timeouts: self.idle_timeouts + other.idle_timeouts,
            shed_never_spoken: self.shed_never_spoken + other.shed_never_spoken,
            shed_idle: self.shed_idle + other.shed_idle,
            refused_at_limit: self.refused_at_limit + other.refused_at_limit,
            descriptor_shortages: self.descriptor_shortages + other.descriptor_shortages,
        }
    }
}
