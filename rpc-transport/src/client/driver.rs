//! The task of one connection: it drives h2's connection future (reading frames,
//! writing what the streams queued) and, when asked, checks the peer with keep-alive
//! PINGs, closing a connection whose PING goes unanswered.

use std::time::Duration;

use bytes::Bytes;
use h2::client::Connection;
use h2::{Ping, PingPong};
use tokio::io::{AsyncRead, AsyncWrite};

/// Keep-alive PINGs: one every `interval`, each answered within `timeout`.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeepAlive {
    pub(super) interval: Duration,
    pub(super) timeout: Duration,
}

/// Runs `connection` on a task of its own until it ends (closed by either side, broken,
/// or its keep-alive unanswered), then calls `ended`.
pub(super) fn spawn<T>(
    mut connection: Connection<T, Bytes>,
    keepalive: Option<KeepAlive>,
    authority: String,
    ended: impl FnOnce() + Send + 'static,
) where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let pings = keepalive.and_then(|keepalive| Some((connection.ping_pong()?, keepalive)));
    tokio::spawn(async move {
        match pings {
            None => {
                if let Err(error) = (&mut connection).await {
                    tracing::debug!(%authority, %error, "connection ended");
                }
            }
            Some((pings, keepalive)) => tokio::select! {
                result = &mut connection => {
                    if let Err(error) = result {
                        tracing::debug!(%authority, %error, "connection ended");
                    }
                }
                () = unanswered(pings, keepalive) => tracing::info!(
                    %authority,
                    timeout_ms = keepalive.timeout.as_millis() as u64,
                    "keep-alive PING unanswered; closing the connection"
                ),
            },
        }
        // Forgotten first, so that no call is given this connection again; then dropped,
        // which closes its socket: streams still open on it end with an error, so their
        // calls fail now rather than at their own timeouts.
        ended();
        drop(connection);
    });
}

/// Resolves when a PING goes unanswered within the timeout; never while the peer
/// answers (nor once the connection is closing, which ends the task another way).
async fn unanswered(mut pings: PingPong, keepalive: KeepAlive) {
    loop {
        tokio::time::sleep(keepalive.interval).await;
        match tokio::time::timeout(keepalive.timeout, pings.ping(Ping::opaque())).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return std::future::pending().await,
            Err(_) => return,
        }
    }
}
