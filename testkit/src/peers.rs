//! Peers that never finish a graceful HTTP/2 close, for the tests and the benchmark of
//! issue 12's rule 1 ("no peer holds a shutdown or fails it").

use std::net::SocketAddr;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The HTTP/2 client preface followed by an empty SETTINGS frame.
const PREFACE_AND_SETTINGS: &[u8] =
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// One connection of each kind of peer that never ends a graceful close by itself. Kept
/// alive while this value lives; dropping it closes them.
#[derive(Debug)]
pub struct StubbornPeers {
    /// Connected, never sent a byte.
    _silent: TcpStream,
    /// Sent the preface and SETTINGS, reads nothing more: never answers a PING.
    _mute: TcpStream,
    /// Sent the preface, then shut its writing side.
    _half_closed: TcpStream,
    /// An HTTP/2 client (h2) that answers PINGs by itself but opens no stream and never
    /// closes: it ignores a GOAWAY.
    ignoring: JoinHandle<()>,
    /// A tonic client that made one call and stays idle.
    _idle: EchoClient<tonic::transport::Channel>,
}

impl StubbornPeers {
    /// Connects one peer of each kind to the echo provider at `addr`.
    ///
    /// # Panics
    /// When a connection or the idle client's call fails (a test set-up error).
    pub async fn connect(addr: SocketAddr) -> Self {
        let silent = TcpStream::connect(addr)
            .await
            .expect("silent peer connects");
        let mut mute = TcpStream::connect(addr).await.expect("mute peer connects");
        mute.write_all(PREFACE_AND_SETTINGS).await.expect("preface");
        let mut settings = [0u8; 9];
        mute.read_exact(&mut settings)
            .await
            .expect("server SETTINGS");
        assert_eq!(settings[3], 0x4, "the server answers with SETTINGS");
        let mut half_closed = TcpStream::connect(addr).await.expect("peer connects");
        half_closed
            .write_all(PREFACE_AND_SETTINGS)
            .await
            .expect("preface");
        half_closed.shutdown().await.expect("half-close");
        let socket = TcpStream::connect(addr).await.expect("h2 peer connects");
        let (_send, connection) = h2::client::handshake(socket).await.expect("h2 handshake");
        let ignoring = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut idle = EchoClient::connect(format!("http://{addr}"))
            .await
            .expect("tonic connects");
        idle.echo(EchoRequest {
            payload: bytes::Bytes::from_static(b"x"),
            delay_ms: None,
        })
        .await
        .expect("one call");
        Self {
            _silent: silent,
            _mute: mute,
            _half_closed: half_closed,
            ignoring,
            _idle: idle,
        }
    }

    /// How many connections this opened.
    pub const CONNECTIONS: usize = 5;
}

impl Drop for StubbornPeers {
    fn drop(&mut self) {
        self.ignoring.abort();
    }
}
