//! A loopback TCP proxy the conformance tests put between a registry client and its
//! server, to cut the connection and restore it at will.
//!
//! `cut` closes every proxied connection at once and closes each new one as soon as it is
//! accepted (the client sees the server go away, as when it is killed or restarted);
//! `restore` lets new connections through again. The proxy stops when dropped.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A running proxy from `addr()` to one upstream address.
pub struct Proxy {
    addr: SocketAddr,
    /// The token of the current "open" period: cancelled by `cut`, `None` while cut.
    open: Arc<Mutex<Option<CancellationToken>>>,
    stop: CancellationToken,
}

impl Proxy {
    /// Starts a proxy on a free loopback port, open.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy on loopback");
        let addr = listener.local_addr().expect("proxy address");
        let open = Arc::new(Mutex::new(Some(CancellationToken::new())));
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, upstream, open.clone(), stop.clone()));
        Self { addr, open, stop }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every proxied connection and refuses new ones until `restore`.
    pub fn cut(&self) {
        if let Some(token) = self.open.lock().take() {
            token.cancel();
        }
    }

    /// Lets new connections through again.
    pub fn restore(&self) {
        let mut open = self.open.lock();
        if open.is_none() {
            *open = Some(CancellationToken::new());
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.cut();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    open: Arc<Mutex<Option<CancellationToken>>>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        // While cut, the connection is dropped (closed) at once.
        let Some(token) = open.lock().clone() else {
            continue;
        };
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut client, mut server) = (client, server);
            tokio::select! {
                () = token.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
            }
        });
    }
}
