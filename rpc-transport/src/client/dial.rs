//! Making one connection: TCP (with `TCP_NODELAY`), TLS when configured (tokio-rustls,
//! ALPN `h2`), then the HTTP/2 preface with the settings of `options.rs`; the whole
//! dial bounded by the connect timeout.

use std::io;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::driver::{self, KeepAlive};
use super::options::http2;
use crate::ChannelOptions;
use crate::tls::ClientTlsConfig;

/// Where a connection goes and how.
#[derive(Debug)]
pub(super) struct Target {
    /// `host:port`, as dialled.
    pub(super) authority: String,
    pub(super) tls: Option<ClientTlsConfig>,
    pub(super) keepalive: Option<KeepAlive>,
    pub(super) connect_timeout: std::time::Duration,
}

impl Target {
    pub(super) fn new(
        authority: String,
        options: &ChannelOptions,
        tls: Option<ClientTlsConfig>,
    ) -> Self {
        Self {
            authority,
            tls,
            keepalive: options.http2_keepalive_interval.map(|interval| KeepAlive {
                interval,
                timeout: options.http2_keepalive_timeout,
            }),
            connect_timeout: options.connect_timeout,
        }
    }
}

/// A new connection to `target`, its task spawned (`ended` runs when it ends); the
/// handle that opens streams on it.
///
/// # Errors
/// The dial's `io::Error`: refused, unreachable, TLS refused, or `TimedOut` past the
/// connect timeout.
pub(super) async fn dial(
    target: &Target,
    ended: impl FnOnce() + Send + 'static,
) -> io::Result<SendRequest<Bytes>> {
    let connect = async {
        let tcp = TcpStream::connect(&target.authority).await?;
        tcp.set_nodelay(true)?;
        match &target.tls {
            None => handshake(tcp, target, ended).await,
            Some(tls) => {
                let connector = TlsConnector::from(tls.config.clone());
                let stream = connector.connect(tls.server_name.clone(), tcp).await?;
                handshake(stream, target, ended).await
            }
        }
    };
    match tokio::time::timeout(target.connect_timeout, connect).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no connection within {} ms (connect_timeout)",
                target.connect_timeout.as_millis()
            ),
        )),
    }
}

async fn handshake<T>(
    io: T,
    target: &Target,
    ended: impl FnOnce() + Send + 'static,
) -> io::Result<SendRequest<Bytes>>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(http2::STREAM_WINDOW)
        .initial_connection_window_size(http2::CONNECTION_WINDOW)
        .max_frame_size(http2::MAX_FRAME_SIZE)
        .max_header_list_size(http2::MAX_HEADER_LIST_SIZE)
        .max_send_buffer_size(http2::MAX_SEND_BUFFER)
        .initial_max_send_streams(http2::INITIAL_MAX_SEND_STREAMS)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|error| io::Error::other(error.to_string()))?;
    driver::spawn(
        connection,
        target.keepalive,
        target.authority.clone(),
        ended,
    );
    Ok(send)
}
