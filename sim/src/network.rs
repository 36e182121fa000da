//! The framework's network seam (`rpc::transport::NetworkStack`) over turmoil's
//! simulated TCP: a provider's listener and a consumer's dials become connections
//! between simulated hosts, which the schedule can hold (a paused host), cut (a
//! crash) or partition.
//!
//! A hot upgrade's two generations share one listener, as two processes holding one
//! socket do: a bind of a port a live listener of the same process lineage holds
//! returns a listener that accepts from the same queue, so no dial is refused while
//! one generation gives way to the next.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use rpc::transport::{BoxStream, NetworkListener, NetworkStack};

/// Connections through turmoil's network, from the host whose code dials or binds.
/// Clones share their listeners (give the clone of a provider's stack to its
/// successor).
#[derive(Clone, Debug, Default)]
pub struct TurmoilNetwork {
    /// The live listeners bound through this stack, by port.
    listeners: Arc<Mutex<HashMap<u16, Weak<turmoil::net::TcpListener>>>>,
}

impl NetworkStack for TurmoilNetwork {
    fn connect(&self, authority: &str) -> BoxFuture<'static, io::Result<BoxStream>> {
        let authority = authority.to_owned();
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(authority).await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn NetworkListener>>> {
        let listeners = self.listeners.clone();
        Box::pin(async move {
            let shared = listeners.lock().get(&addr.port()).and_then(Weak::upgrade);
            let listener = match shared {
                Some(listener) => listener,
                None => {
                    // turmoil listens on the wildcard only; the host's own address is
                    // where dialers reach it.
                    let wildcard = SocketAddr::from(([0, 0, 0, 0], addr.port()));
                    let listener = Arc::new(turmoil::net::TcpListener::bind(wildcard).await?);
                    let port = listener.local_addr()?.port();
                    listeners.lock().insert(port, Arc::downgrade(&listener));
                    listener
                }
            };
            let port = listener.local_addr()?.port();
            let reachable = SocketAddr::new(addr.ip(), port);
            Ok(Box::new(TurmoilListener {
                listener,
                reachable,
            }) as Box<dyn NetworkListener>)
        })
    }
}

/// A turmoil listener as the framework's accept loop takes it, with the address it
/// was asked to bind.
struct TurmoilListener {
    listener: Arc<turmoil::net::TcpListener>,
    reachable: SocketAddr,
}

impl NetworkListener for TurmoilListener {
    fn local_addr(&self) -> SocketAddr {
        self.reachable
    }

    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, peer) = self.listener.accept().await?;
            Ok((Box::new(stream) as BoxStream, peer))
        })
    }
}
