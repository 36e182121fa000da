//! Where connections come from: the operating system's TCP by default, or a
//! [`NetworkStack`] a program supplies — a simulated network (the fleet simulator runs
//! many providers and consumers as simulated hosts in one process) or any other byte
//! stream that carries HTTP/2.
//!
//! The seam costs the default path nothing: dialing and accepting are generic over the
//! stream type, so TCP connections are served by code made for `TcpStream`, and only a
//! custom stack's connections go through a boxed stream. The choice is made once per
//! dial and once per listener, not per call.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

/// A connection's byte stream from a [`NetworkStack`].
pub trait NetworkStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> NetworkStream for T {}

/// A boxed [`NetworkStream`].
pub type BoxStream = Box<dyn NetworkStream>;

/// Dialing and listening without the operating system's sockets.
///
/// Its futures are boxed (`futures_util::future::BoxFuture`, or
/// `Pin<Box<dyn Future<Output = …> + Send>>` written out). Give it to an application
/// with `ApplicationBuilder::network` (lossless-rpc) after any `channel_options` or
/// `server_options`, which replace it.
///
/// Socket options (`TCP_NODELAY`, `TCP_USER_TIMEOUT`) have no meaning here and are
/// skipped; every HTTP/2 setting, timeout and limit applies as on TCP.
///
/// A hot upgrade hands over no descriptor of a custom stack's listener: the new
/// generation (started in the same process, `ApplicationBuilder::take_over`) binds the
/// same address through its stack. For no dial to be refused in between, the stack's
/// `bind` of an address a live listener of the same host holds must return a listener
/// that shares its accept queue (as two processes holding one socket do), not an error;
/// the old generation stops accepting from it at the hand-over.
pub trait NetworkStack: Send + Sync + 'static {
    /// A connection to `authority` (`host:port`, as the registry advertised it).
    ///
    /// # Errors
    /// Whatever the stack says: refused, unreachable. The dial's connect timeout bounds
    /// it from outside.
    fn connect(&self, authority: &str) -> BoxFuture<'static, io::Result<BoxStream>>;

    /// A listener on `addr` (port 0 asks the stack to choose one).
    ///
    /// # Errors
    /// The stack's refusal, e.g. the address is taken.
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn NetworkListener>>>;
}

/// A listener of a [`NetworkStack`].
pub trait NetworkListener: Send + Sync + 'static {
    /// The address dialers reach it at (what the server reports and the registry may
    /// advertise), not necessarily the one it bound: a stack that binds a wildcard
    /// reports the host's own address.
    fn local_addr(&self) -> SocketAddr;

    /// The next connection, and its peer's address.
    ///
    /// # Errors
    /// The stack's accept error; the accept loop backs off and tries again.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>>;
}

/// A [`NetworkStack`] to give [`ChannelOptions::network`](crate::ChannelOptions::network)
/// and [`ServerOptions::network`](crate::ServerOptions::network): cheap to clone, equal
/// only to clones of itself.
#[derive(Clone)]
pub struct Network(Arc<dyn NetworkStack>);

impl Network {
    /// Connections through `stack` instead of the operating system's TCP.
    pub fn new(stack: impl NetworkStack) -> Self {
        Self(Arc::new(stack))
    }

    /// The stack.
    pub fn stack(&self) -> &dyn NetworkStack {
        &*self.0
    }
}

impl fmt::Debug for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Network(custom)")
    }
}

impl PartialEq for Network {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Network {}
