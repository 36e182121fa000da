//! Delay on a link, where the kernel cannot add it: a TCP relay on a host of the lab
//! that forwards each connection to a target and hands every chunk on a fixed delay
//! after it arrived, in order, both ways.
//!
//! The kernels of these machines have neither `netem` nor nftables' `queue` expression
//! (seen: "Could not process rule: No such file or directory"), so packets cannot be
//! held back below TCP. The relay delays the bytes instead: a program dials the relay's
//! address (a provider registers it as its `advertise_host`), and every byte it sends
//! or receives is `delay` late — one TCP hop more, with its own acknowledgements, which
//! a delaying qdisc would not add.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::Host;

/// Chunks held in one direction before the relay stops reading from that side: the
/// window of a link with delay.
const IN_FLIGHT_CHUNKS: usize = 256;
/// Largest chunk read at once.
const CHUNK: usize = 64 * 1024;

/// A relay running on a host; stopped (its listener and every connection closed) when
/// dropped.
#[derive(Debug)]
pub struct Relay {
    address: SocketAddr,
    ip: Ipv4Addr,
    _stop: oneshot::Sender<()>,
}

impl Relay {
    /// Starts a relay on `host`, listening on the host's address and `port`, forwarding
    /// every connection to `target` with `delay` each way.
    ///
    /// # Errors
    /// When the port cannot be bound on the host.
    pub async fn start(
        host: &Host,
        port: u16,
        target: SocketAddr,
        delay: Duration,
    ) -> std::io::Result<Self> {
        let (bound_tx, bound) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let ip = host.address();
        // The relay's program runs on its host's thread until `stop` is dropped; what it
        // returns is not awaited.
        drop(host.run(move || async move {
            let listener = match TcpListener::bind((ip, port)).await {
                Ok(listener) => listener,
                Err(error) => {
                    let _ = bound_tx.send(Err(error));
                    return;
                }
            };
            let _ = bound_tx.send(listener.local_addr());
            tokio::select! {
                _ = stopped => {}
                () = accept_loop(listener, target, delay) => {}
            }
        }));
        let address = bound
            .await
            .map_err(|_| std::io::Error::other("the relay's host thread ended"))??;
        Ok(Self {
            address,
            ip,
            _stop: stop,
        })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The address it listens on, without the port.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }
}

/// Relays every accepted connection until the runtime ends.
async fn accept_loop(listener: TcpListener, target: SocketAddr, delay: Duration) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((inbound, _)) = listener.accept().await {
        connections.spawn(relay_one(inbound, target, delay));
        // Reap what ended, so a long run does not keep every connection's result.
        while connections.try_join_next().is_some() {}
    }
}

/// Relays one connection both ways; ends when either side closes.
async fn relay_one(inbound: TcpStream, target: SocketAddr, delay: Duration) {
    let Ok(outbound) = TcpStream::connect(target).await else {
        // The target refuses: so does the relay (the client sees its connection close).
        return;
    };
    for stream in [&inbound, &outbound] {
        let _ = stream.set_nodelay(true);
    }
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    tokio::join!(
        one_way(in_read, out_write, delay),
        one_way(out_read, in_write, delay),
    );
}

/// Copies `from` to `to`, each chunk written `delay` after it was read; shuts `to`'s
/// sending side down when `from` ends.
async fn one_way(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (chunks, mut due) = mpsc::channel::<(Instant, Bytes)>(IN_FLIGHT_CHUNKS);
    let reader = async move {
        let mut buffer = vec![0u8; CHUNK];
        while let Ok(read) = from.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            let chunk = Bytes::copy_from_slice(&buffer[..read]);
            if chunks.send((Instant::now() + delay, chunk)).await.is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
