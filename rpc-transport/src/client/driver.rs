//! The task of one connection: it drives h2's connection future (reading frames,
//! writing what the streams queued) and watches the peer — keep-alive PINGs when
//! nothing has been heard for a while, and a PING whenever a call asks for a probe —
//! closing the connection when a PING goes unanswered.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::Connection;
use h2::{Ping, PingPong};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::link::Link;
use crate::woken::PolledWhenWoken;

/// How the peer is watched (see `ChannelOptions`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    /// Keep-alive PING after this long unheard while streams are open.
    pub(super) busy: Option<Duration>,
    /// Keep-alive PING after this long unheard on an idle connection.
    pub(super) idle: Option<Duration>,
    /// Answer wait of a keep-alive PING.
    pub(super) keepalive_timeout: Duration,
    /// Answer wait of a PING a call asked for.
    pub(super) probe_timeout: Duration,
}

/// Runs `connection` on a task of its own until it ends (closed by either side, broken,
/// or a PING unanswered), then marks `link` dead and calls `ended`.
///
/// h2's handle for sending PINGs is taken from the connection only when the first PING
/// is due: once taken, h2 registers a waker for it at every poll of the connection
/// (about 200 instructions per call under callgrind), and a busy connection never
/// pings. The connection sits behind a lock its two users — the future that drives
/// it and the watchdog that may take the handle — take in turn, on this one task.
pub(super) fn spawn<T>(
    connection: Connection<T, Bytes>,
    link: Arc<Link>,
    watch: Watch,
    authority: String,
    ended: impl FnOnce() + Send + 'static,
) where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    tokio::spawn(async move {
        let connection = Mutex::new(connection);
        let drive = poll_fn(|cx| Pin::new(&mut *connection.lock()).poll(cx));
        tokio::select! {
            result = drive => {
                if let Err(error) = result {
                    tracing::debug!(%authority, %error, "connection ended");
                }
            }
            // The watchdog waits on a timer and on a call's request for a probe; polled
            // at every wake of this task (every frame), that was ~450 instructions a
            // wake (callgrind, a ping-pong stream): polled only when it woke the task.
            timeout = PolledWhenWoken::new(unanswered(&connection, &link, watch)) => {
                link.mark_unresponsive();
                tracing::info!(
                    %authority,
                    timeout_ms = timeout.as_millis() as u64,
                    "PING unanswered; closing the connection"
                );
            }
        }
        // Forgotten first, so that no call is given this connection again; then dropped,
        // which closes its socket: streams still open on it end with an error, so their
        // calls fail now rather than at their own timeouts.
        link.died();
        ended();
        drop(connection);
    });
}

/// Resolves with the PING's timeout when a PING goes unanswered (and nothing else was
/// heard) within it; never while the peer answers, nor once the connection is closing
/// (which ends the task another way).
async fn unanswered<T>(
    connection: &Mutex<Connection<T, Bytes>>,
    link: &Link,
    watch: Watch,
) -> Duration
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut pings: Option<PingPong> = None;
    let mut last_heard = (link.heard(), Instant::now());
    // h2 allows one PING of ours at a time: one that timed out while bytes were heard
    // is still awaited by the next round rather than sent again.
    let mut pong_pending = false;
    loop {
        let asked = tokio::select! {
            biased;
            () = link.probe_asked() => true,
            () = keepalive_due(link, watch, &mut last_heard) => false,
        };
        let timeout = if asked {
            watch.probe_timeout
        } else {
            watch.keepalive_timeout
        };
        let round = link.begin_round();
        let heard_before = link.heard();
        if pings.is_none() {
            pings = connection.lock().ping_pong();
        }
        let Some(pings) = pings.as_mut() else {
            // Taken once, here: never. Nothing to send PINGs with.
            return std::future::pending().await;
        };
        if !pong_pending {
            if pings.send_ping(Ping::opaque()).is_err() {
                // The connection is closing: its own future ends the task.
                return std::future::pending().await;
            }
            // h2 writes the PING when the connection is next polled; a handle just taken
            // has no waker registered with it yet, so the task is woken here for that.
            tokio::task::yield_now().await;
        }
        pong_pending = true;
        let pong = tokio::time::timeout(timeout, poll_fn(|cx| pings.poll_pong(cx))).await;
        let answered = match pong {
            Ok(Ok(_)) => {
                pong_pending = false;
                true
            }
            Ok(Err(_)) => return std::future::pending().await,
            // A PING queued behind a large response may wait its turn: bytes heard
            // meanwhile prove the peer alive just as well.
            Err(_) => link.heard() != heard_before,
        };
        if !answered {
            return timeout;
        }
        link.round_alive(round);
        last_heard = (link.heard(), Instant::now());
    }
}

/// Resolves when a keep-alive PING is due: nothing heard for the busy interval while
/// streams are open, or for the idle interval otherwise. Checks at the shorter of the
/// two; `last_heard` is the read count and when it last changed.
async fn keepalive_due(link: &Link, watch: Watch, last_heard: &mut (u64, Instant)) {
    let Some(tick) = [watch.busy, watch.idle].into_iter().flatten().min() else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(tick).await;
        let now = Instant::now();
        let heard = link.heard();
        if heard != last_heard.0 {
            *last_heard = (heard, now);
            continue;
        }
        let interval = if link.open_streams() > 0 {
            watch.busy
        } else {
            watch.idle
        };
        if interval.is_some_and(|interval| now.duration_since(last_heard.1) >= interval) {
            return;
        }
    }
}
