//! What the accept loop takes connections from: a TCP listener, or the listener of a
//! custom [`NetworkStack`](crate::NetworkStack). Generic rather than boxed, so a TCP
//! connection is served by code made for `TcpStream` (see `network.rs`).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tonic::transport::server::TcpConnectInfo;

use crate::network::{BoxStream, NetworkListener};

/// The socket a server accepts on.
pub(crate) enum Listener {
    /// The operating system's (bound here, or inherited).
    Tcp(TcpListener),
    /// A custom network stack's (`ServerOptions::network`).
    Custom(Box<dyn NetworkListener>),
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(tcp) => tcp.fmt(f),
            Self::Custom(custom) => write!(f, "custom listener on {}", custom.local_addr()),
        }
    }
}

/// Binds `addr` on TCP with room for `backlog` connections the kernel has completed
/// and the accept loop has not yet taken (capped by the kernel at
/// `net.core.somaxconn`). `SO_REUSEADDR` as the standard library sets it, so a restart
/// can bind the port its predecessor's closed connections still name.
pub(crate) fn bind_tcp(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// Sets the backlog of an inherited, already listening socket (Linux applies a second
/// `listen` to the queue's size); a failure keeps the queue it had.
pub(crate) fn set_backlog(listener: &std::net::TcpListener, backlog: u32) {
    let backlog = i32::try_from(backlog).unwrap_or(i32::MAX);
    if let Err(error) = socket2::SockRef::from(listener).listen(backlog) {
        tracing::debug!(%error, "cannot set the backlog of an inherited listener");
    }
}

/// A source of accepted connections.
pub(crate) trait Acceptor: Send + 'static {
    /// An accepted connection's stream.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// The next connection and its peer's address.
    fn accept(&mut self) -> impl Future<Output = io::Result<(Self::Stream, SocketAddr)>> + Send;

    /// Socket options of an accepted connection, where it has any.
    fn set_up(stream: &Self::Stream, tcp_user_timeout: Option<Duration>);

    /// The addresses handlers can ask of their call (`Request::local_addr()` /
    /// `remote_addr()`, as with tonic's own server); `listening` is the listener's.
    fn connect_info(
        stream: &Self::Stream,
        peer: SocketAddr,
        listening: SocketAddr,
    ) -> TcpConnectInfo;
}

impl Acceptor for TcpListener {
    type Stream = TcpStream;

    fn accept(&mut self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send {
        TcpListener::accept(self)
    }

    /// `TCP_NODELAY` (see the crate documentation), and `TCP_USER_TIMEOUT` on Linux
    /// (see `ServerOptions`).
    fn set_up(stream: &TcpStream, tcp_user_timeout: Option<Duration>) {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY on an accepted socket");
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(timeout) = tcp_user_timeout.filter(|timeout| !timeout.is_zero())
            && let Err(error) = socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout))
        {
            tracing::debug!(%error, "cannot set TCP_USER_TIMEOUT on an accepted socket");
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = tcp_user_timeout;
    }

    fn connect_info(
        stream: &TcpStream,
        peer: SocketAddr,
        _listening: SocketAddr,
    ) -> TcpConnectInfo {
        TcpConnectInfo {
            local_addr: stream.local_addr().ok(),
            remote_addr: Some(peer),
        }
    }
}

impl Acceptor for Box<dyn NetworkListener> {
    type Stream = BoxStream;

    fn accept(&mut self) -> impl Future<Output = io::Result<(BoxStream, SocketAddr)>> + Send {
        (**self).accept()
    }

    /// A custom stack's streams have no socket options.
    fn set_up(_stream: &BoxStream, _tcp_user_timeout: Option<Duration>) {}

    fn connect_info(
        _stream: &BoxStream,
        peer: SocketAddr,
        listening: SocketAddr,
    ) -> TcpConnectInfo {
        TcpConnectInfo {
            local_addr: Some(listening),
            remote_addr: Some(peer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel queues the backlog asked for: 300 connections complete while the
    /// accept loop takes none. With the standard library's 128 the 130th never would
    /// (its SYN is dropped, and again at each retransmission, while the queue is full),
    /// and the bound below would end the test.
    #[tokio::test]
    async fn connections_past_128_wait_in_the_backlog() {
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|value| value.trim().parse::<u32>().ok())
            .unwrap_or(4096);
        assert!(
            somaxconn >= 300,
            "net.core.somaxconn {somaxconn} caps the backlog"
        );
        let listener = bind_tcp("127.0.0.1:0".parse().unwrap(), 1024).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        for _ in 0..300 {
            let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
                .await
                .expect("queued by the kernel")
                .unwrap();
            queued.push(stream);
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn accepted_sockets_get_a_user_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        <TcpListener as Acceptor>::set_up(&accepted, Some(Duration::from_secs(20)));
        let socket = socket2::SockRef::from(&accepted);
        assert_eq!(
            socket.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(20))
        );
        assert!(accepted.nodelay().unwrap());
    }
}
