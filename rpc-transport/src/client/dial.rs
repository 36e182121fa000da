//! Making one connection: TCP (with `TCP_NODELAY` and `TCP_USER_TIMEOUT`), TLS when
//! configured (tokio-rustls, ALPN `h2`, its files read now), then the HTTP/2 preface
//! with the settings of `options.rs`; the whole dial bounded by the connect timeout. A
//! [`Network`] in the options replaces TCP (no socket options then).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::driver::{self, Watch};
use super::heard::Heard;
use super::link::Link;
use super::options::http2;
use crate::{ChannelOptions, ClientTls, Network};

/// Where a connection goes and how.
#[derive(Debug)]
pub(super) struct Target {
    /// `host:port`, as dialled.
    pub(super) authority: String,
    /// The host part of `authority`: the name a TLS certificate must carry by default.
    host: String,
    /// TLS settings; the files are read at each dial, so a rotation is seen by the next
    /// connection, and a file that cannot be read fails that dial only.
    tls: Option<ClientTls>,
    watch: Watch,
    connect_timeout: Duration,
    tcp_user_timeout: Option<Duration>,
    /// Flow-control windows: of each stream, of the whole connection.
    windows: (u32, u32),
    /// Dial through this stack instead of TCP (a simulation's network).
    network: Option<Network>,
}

impl Target {
    pub(super) fn new(authority: String, host: String, options: &ChannelOptions) -> Self {
        Self {
            authority,
            host,
            tls: options.tls.clone(),
            watch: Watch {
                busy: options.http2_keepalive_interval,
                idle: options.http2_idle_keepalive_interval,
                keepalive_timeout: options.http2_keepalive_timeout,
                probe_timeout: options.probe_timeout,
            },
            connect_timeout: options.connect_timeout,
            tcp_user_timeout: options.tcp_user_timeout,
            windows: (
                options.initial_stream_window_size,
                options.initial_connection_window_size,
            ),
            network: options.network.clone(),
        }
    }

    /// Whether connections speak TLS.
    pub(super) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

/// A new connection to `target`, its task spawned (`ended` runs when it ends); the
/// handle that opens streams on it and what its calls share with its task.
///
/// # Errors
/// The dial's `io::Error`: refused, unreachable, a TLS file that cannot be used, TLS
/// refused, or `TimedOut` past the connect timeout.
pub(super) async fn dial(
    target: &Target,
    ended: impl FnOnce() + Send + 'static,
) -> io::Result<(SendRequest<Bytes>, Arc<Link>)> {
    let connect = async {
        let link = Link::new();
        let send = match &target.network {
            None => {
                let tcp = TcpStream::connect(&target.authority).await?;
                tcp.set_nodelay(true)?;
                if let Some(timeout) = target.tcp_user_timeout {
                    set_tcp_user_timeout(&tcp, timeout);
                }
                secure_then_handshake(Heard::new(tcp, link.clone()), target, &link, ended).await?
            }
            Some(network) => {
                let stream = network.stack().connect(&target.authority).await?;
                secure_then_handshake(Heard::new(stream, link.clone()), target, &link, ended)
                    .await?
            }
        };
        Ok((send, link))
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

/// TLS over `io` when the target asks for it, then the HTTP/2 handshake.
async fn secure_then_handshake<T>(
    io: T,
    target: &Target,
    link: &Arc<Link>,
    ended: impl FnOnce() + Send + 'static,
) -> io::Result<SendRequest<Bytes>>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    match &target.tls {
        None => handshake(io, target, link, ended).await,
        Some(tls) => {
            let config = tls
                .client_config(&target.host)
                .map_err(|error| io::Error::other(error.to_string()))?;
            let connector = TlsConnector::from(config.config);
            let stream = connector.connect(config.server_name, io).await?;
            handshake(stream, target, link, ended).await
        }
    }
}

/// `TCP_USER_TIMEOUT` on `tcp` where the system has it; a failure only loses the
/// backstop, so it is logged, not returned.
fn set_tcp_user_timeout(tcp: &TcpStream, timeout: Duration) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    if let Err(error) = socket2::SockRef::from(tcp).set_tcp_user_timeout(Some(timeout)) {
        tracing::debug!(%error, "cannot set TCP_USER_TIMEOUT on a dialled socket");
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")))]
    let _ = (tcp, timeout);
}

async fn handshake<T>(
    io: T,
    target: &Target,
    link: &Arc<Link>,
    ended: impl FnOnce() + Send + 'static,
) -> io::Result<SendRequest<Bytes>>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(target.windows.0)
        .initial_connection_window_size(target.windows.1)
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
        link.clone(),
        target.watch,
        target.authority.clone(),
        ended,
    );
    Ok(send)
}
