//! The consumer's connection to one instance: gRPC over the `h2` crate's client
//! directly, under the unchanged tonic stubs.
//!
//! What it follows:
//! - **h2's client** (`h2::client`): a `SendRequest` handle is cloned per call and the
//!   stream is opened on the caller's task; only the connection future has a task
//!   (`driver.rs`). There is no request queue and no dispatch task between the caller
//!   and the connection, as tonic's `Channel` (tower `Buffer`) and hyper's client
//!   dispatch have. At the peer's `SETTINGS_MAX_CONCURRENT_STREAMS` a call waits for a
//!   stream permit in the open (`link.rs`), never in h2's own queue, where it would look
//!   sent.
//! - **gRPC over HTTP/2** (grpc/grpc `doc/PROTOCOL-HTTP2.md`): `:scheme` and
//!   `:authority` from the instance's address, the stub's path, its headers as given;
//!   the status in the trailers is read by the layers above.
//! - **Transparent retry** (gRPC proposal A6): a request that never reached the instance
//!   fails with [`NotSent`] — no connection could be made, the connection had closed, or
//!   the instance's GOAWAY came first (h2 refuses new streams after it) — and its
//!   [`SendReport`] says its stream never opened, so the cluster layer re-sends it without
//!   the risk of running it twice. Dropping the connection after a GOAWAY and dialling
//!   again on the next call is also how a hot upgrade's new process is reached: the old
//!   one's socket is closed, the new one listens on the same port.
//! - **Dead peers**: keep-alive PINGs when the peer has been silent (`driver.rs`), a
//!   PING on demand for a call whose answer is overdue ([`SendReport::probe`]), and
//!   `TCP_USER_TIMEOUT` under both; an unanswered PING closes the connection.
//!
//! Files: `options.rs` (settings), `dial.rs` (TCP, TLS, the HTTP/2 handshake),
//! `driver.rs` (the connection's task, its PINGs), `link.rs` (what calls and the task
//! share: stream permits, liveness), `heard.rs` (the socket's reads counted),
//! `report.rs` (what a call learns of its sending), `request_body.rs` (a body onto its
//! stream, with flow control), `response_body.rs` (a stream into a body),
//! `not_sent.rs` (the error of a request that certainly did not leave), `slot.rs` (each
//! connection of the instance: found, dialled, forgotten).

mod dial;
mod driver;
mod heard;
mod link;
mod not_sent;
mod options;
mod report;
mod request_body;
mod response_body;
mod slot;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use http_body::Body;
use rpc_core::BoxError;

pub use link::Liveness;
pub use not_sent::NotSent;
pub use options::{
    ChannelOptions, DEFAULT_CLIENT_CONNECTION_WINDOW_SIZE, DEFAULT_CLIENT_IDLE_KEEPALIVE_INTERVAL,
    DEFAULT_CLIENT_KEEPALIVE_INTERVAL, DEFAULT_CLIENT_KEEPALIVE_TIMEOUT,
    DEFAULT_CLIENT_STREAM_WINDOW_SIZE, DEFAULT_CLIENT_TCP_USER_TIMEOUT, DEFAULT_PROBE_TIMEOUT,
};
pub use report::SendReport;
pub use response_body::ResponseBody;

use crate::TransportError;
use dial::Target;
use slot::Slot;

/// The connection to one instance (or several: [`ChannelOptions::connections_per_instance`]),
/// made on first use and made again after it closed.
///
/// Cheap to clone (the clones share one connection). A `tower::Service` for any request
/// body of `Bytes`, so tonic's generated clients run over it unchanged; errors are
/// [`NotSent`] for a request that certainly did not leave, `h2::Error` otherwise.
#[derive(Clone, Debug)]
pub struct InstanceConnection {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    target: Target,
    scheme: Scheme,
    authority: Authority,
    /// One per connection the instance is given (`connections_per_instance`).
    slots: Box<[Slot]>,
    /// The slot of the next call, round robin (used with more than one).
    next: AtomicUsize,
    /// Itself, for a connection's task to forget its connection when it ends.
    weak: Weak<Shared>,
    /// Calls waiting for a stream permit on any of the instance's connections.
    waiting: AtomicUsize,
}

/// A connection to `authority` (`host:port`) that is made on the first call and again
/// after it closed. Must be called within a tokio runtime (connections have tasks).
///
/// With [`ChannelOptions::tls`], the connection speaks HTTPS, and its TLS files are read
/// at each dial: a connection made after a rotation uses the new files, and a file that
/// cannot be read (half-written during a rotation) fails that dial only, as not sent.
///
/// # Errors
/// [`TransportError::InvalidAddress`] when `authority` is not a valid `host:port`;
/// [`TransportError::InvalidChannelOption`] when an option is out of its range
/// ([`ChannelOptions::check`]).
pub fn connect_lazy(
    authority: &str,
    options: &ChannelOptions,
) -> Result<InstanceConnection, TransportError> {
    let invalid = |reason: String| TransportError::InvalidAddress {
        addr: authority.to_owned(),
        reason,
    };
    let parsed: Authority = authority
        .parse()
        .map_err(|error: http::uri::InvalidUri| invalid(error.to_string()))?;
    if parsed.port_u16().is_none() {
        return Err(invalid("no port".to_owned()));
    }
    options.check()?;
    let target = Target::new(authority.to_owned(), parsed.host().to_owned(), options);
    let scheme = if target.is_tls() {
        Scheme::HTTPS
    } else {
        Scheme::HTTP
    };
    Ok(InstanceConnection {
        shared: Arc::new_cyclic(|weak| Shared {
            target,
            scheme,
            authority: parsed,
            slots: (0..options.connections_per_instance.max(1))
                .map(|_| Slot::default())
                .collect(),
            next: AtomicUsize::new(0),
            weak: weak.clone(),
            waiting: AtomicUsize::new(0),
        }),
    })
}

impl InstanceConnection {
    /// `host:port` of the instance.
    pub fn authority(&self) -> &str {
        &self.shared.target.authority
    }

    /// Whether a connection is open now (made and not closed).
    pub fn is_open(&self) -> bool {
        self.shared
            .slots
            .iter()
            .any(|slot| slot.current.load().is_some())
    }

    /// Calls waiting now for a stream: the instance's stream limit is reached on their
    /// connection. A load balance can weigh them: each waits for a call ahead of it to
    /// end.
    pub fn waiting_for_streams(&self) -> usize {
        self.shared.waiting.load(Ordering::Relaxed)
    }

    /// Sends `request` on a stream of its own: the connection made first if there is
    /// none, a stream permit taken (waiting while the instance's stream limit is
    /// reached), the head written, the body sent; resolves with the response's head.
    /// `report` tells the caller, also after this future was dropped, whether the
    /// stream was opened, and lets it probe the connection (see [`SendReport`]).
    ///
    /// # Errors
    /// [`NotSent`] for a request that certainly did not leave (no connection, the
    /// connection closed or refused new streams before the stream opened);
    /// `h2::Error` once the stream was opened (reset, GOAWAY, connection lost).
    pub fn send<'a, B>(
        &'a self,
        request: Request<B>,
        report: &'a SendReport,
    ) -> impl Future<Output = Result<Response<ResponseBody>, BoxError>> + Send + 'a
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        self.shared.send(request, report)
    }
}

impl InstanceConnection {
    /// Makes sure every connection of the instance answers: each is made if there is
    /// none, and sent a PING that must be answered within the probe timeout. Used
    /// before trusting a call to an instance that stopped answering before (an
    /// ejected instance's probe): a paused process's kernel still accepts connections,
    /// so a connection alone proves nothing.
    ///
    /// # Errors
    /// [`NotSent`]: no connection could be made, or one did not answer its PING (it is
    /// closed).
    pub async fn check(&self) -> Result<(), BoxError> {
        for slot in 0..self.shared.slots.len() {
            let (_, link, _) = self.shared.open(slot).await?;
            if link.probe().await == Liveness::Unresponsive {
                return Err(Box::new(NotSent::new(
                    format!(
                        "the connection to {} did not answer a PING",
                        self.shared.target.authority
                    ),
                    "PING unanswered",
                )));
            }
        }
        Ok(())
    }
}

impl<B> tower::Service<Request<B>> for InstanceConnection
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, BoxError>> + Send>>;

    /// Always ready: a call waits for its connection and for a free stream itself.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    /// As [`InstanceConnection::send`], without a report.
    fn call(&mut self, request: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move { shared.send(request, &SendReport::default()).await })
    }
}

impl Shared {
    /// One request: a stream on the open connection (made first if there is none), its
    /// body sent, its response's headers awaited.
    async fn send<B>(
        &self,
        request: Request<B>,
        report: &SendReport,
    ) -> Result<Response<ResponseBody>, BoxError>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let slot = self.pick();
        let (send, link, dial) = match self.current(slot) {
            Some(open) => open,
            // Boxed: the dial's future (TCP, TLS, the HTTP/2 handshake) is 4 KiB, and
            // inline it would make every request's future that large, to be copied.
            None => Box::pin(self.open(slot)).await?,
        };
        report.on(&link);
        let (head, body) = self.head(request)?;
        let limit = || send.current_max_send_streams();
        let Some(permit) = link.admit(limit, &self.waiting).await else {
            return Err(self.closed_before_open(slot, dial, "closed"));
        };
        let mut send = match send.ready().await {
            Ok(send) => send,
            Err(error) => return Err(self.closed(slot, dial, error)),
        };
        let end = body.is_end_stream();
        let (response, stream) = match send.send_request(head, end) {
            Ok(opened) => opened,
            Err(error) => return Err(self.closed(slot, dial, error)),
        };
        report.opened(&link);
        let request = if end {
            None
        } else {
            request_body::send(body, stream)
        };
        let response = response.await?;
        link.learn_stream_limit(|| send.current_max_send_streams());
        Ok(response.map(|recv| ResponseBody::new(recv, request, permit)))
    }

    /// The request's head for h2: the URI made absolute on the instance's address, the
    /// headers HTTP/2 forbids removed (RFC 9113 §8.2.2; h2 refuses a request with them).
    fn head<B>(&self, request: Request<B>) -> Result<(Request<()>, B), BoxError> {
        let (mut parts, body) = request.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let mut uri = Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()?;
        std::mem::swap(&mut parts.uri, &mut uri);
        for name in [
            http::header::CONNECTION,
            http::header::TRANSFER_ENCODING,
            http::header::UPGRADE,
        ] {
            parts.headers.remove(name);
        }
        Ok((Request::from_parts(parts, ()), body))
    }

    /// The slot of this call: the only one, or the next in turn. Round robin rather than
    /// fewest streams: h2 does not count a connection's open streams cheaply, and calls
    /// of one consumer to one instance are alike.
    fn pick(&self) -> usize {
        match self.slots.len() {
            1 => 0,
            n => self.next.fetch_add(1, Ordering::Relaxed) % n,
        }
    }
}
