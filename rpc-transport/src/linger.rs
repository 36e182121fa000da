//! Closing a connection without resetting what its peer sent last (a *lingering close*,
//! as nginx's `lingering_close`).
//!
//! When HTTP/2 ends a connection gracefully, h2 has sent the final GOAWAY, every stream
//! up to its last stream id has ended, and the socket is dropped. A request the peer
//! sent just before it read that GOAWAY is then unread in our receive buffer, and
//! closing a socket with unread data makes the kernel answer with a TCP reset (RFC 2525
//! §2.17), which can reach the peer before it has processed the GOAWAY: it sees a
//! broken connection under a request it sent, which may have run, and cannot re-send
//! it safely — where the GOAWAY alone tells it (stream id above the last one) that the
//! request was not processed and may go elsewhere. Measured in `hot-upgrade` at
//! 2 000 req/s: 2 of 30 000 requests failed this way before this file.
//!
//! So the connection lends its socket to HTTP/2 ([`Lent`]), gets it back when h2 is
//! done with it, and [`linger`]s: shuts down its sending side, then reads and discards
//! until the peer closes (it does once it has read the GOAWAY and its streams ended),
//! bounded by [`LINGER`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::oneshot;

/// Longest wait for the peer to close after the final GOAWAY: a round trip on any
/// network between a provider and its clients, with a wide margin. A peer that keeps
/// the socket open past it ignores GOAWAY, and nothing it sends now would be served.
pub(crate) const LINGER: Duration = Duration::from_millis(100);

/// Largest read while lingering.
const DISCARD_BUFFER: usize = 4096;

/// A socket lent to HTTP/2: returned through a channel when HTTP/2 drops it.
pub(crate) struct Lent<T> {
    stream: Option<T>,
    back: Option<oneshot::Sender<T>>,
}

impl<T> Lent<T> {
    /// Lends `stream`; the receiver gets it back when the lent socket is dropped.
    pub(crate) fn new(stream: T) -> (Self, oneshot::Receiver<T>) {
        let (back, returned) = oneshot::channel();
        let lent = Self {
            stream: Some(stream),
            back: Some(back),
        };
        (lent, returned)
    }
}

impl<T> Drop for Lent<T> {
    fn drop(&mut self) {
        if let (Some(stream), Some(back)) = (self.stream.take(), self.back.take()) {
            // The receiver is gone when the connection was cut (forced): the socket
            // then closes here, at once.
            let _ = back.send(stream);
        }
    }
}

/// The stream, present until the socket is dropped.
fn stream<T>(lent: &mut Lent<T>) -> io::Result<&mut T> {
    lent.stream
        .as_mut()
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
}

impl<T: AsyncRead + Unpin> AsyncRead for Lent<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match stream(self.get_mut()) {
            Ok(stream) => Pin::new(stream).poll_read(cx, buf),
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Lent<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match stream(self.get_mut()) {
            Ok(stream) => Pin::new(stream).poll_write(cx, buf),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match stream(self.get_mut()) {
            Ok(stream) => Pin::new(stream).poll_flush(cx),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match stream(self.get_mut()) {
            Ok(stream) => Pin::new(stream).poll_shutdown(cx),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match stream(self.get_mut()) {
            Ok(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.as_ref().is_some_and(T::is_write_vectored)
    }
}

/// Shuts down the sending side of `stream`, then reads and discards until the peer
/// closes, an error, or `bound`.
pub(crate) async fn linger<T: AsyncRead + AsyncWrite + Unpin>(mut stream: T, bound: Duration) {
    let drained = async {
        // Already done by h2 after its last frame, in which case this is a no-op.
        let _ = stream.shutdown().await;
        let mut discard = [0u8; DISCARD_BUFFER];
        while let Ok(1..) = stream.read(&mut discard).await {}
    };
    let _ = tokio::time::timeout(bound, drained).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_lent_socket_comes_back() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let (lent, returned) = Lent::new(ours);
        drop(lent);
        assert!(returned.await.is_ok());
    }

    #[tokio::test]
    async fn lingering_reads_what_the_peer_still_sends_until_it_closes() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let peer = tokio::spawn(async move {
            // More than the pipe holds: it only gets through if we read it.
            theirs.write_all(&[7u8; 1024]).await.unwrap();
            drop(theirs);
        });
        linger(ours, Duration::from_secs(5)).await;
        peer.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_never_closes_is_waited_for_at_most_the_bound() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let started = tokio::time::Instant::now();
        linger(ours, LINGER).await;
        assert_eq!(started.elapsed(), LINGER);
    }
}
