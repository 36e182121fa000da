//! A dialled socket (or its TLS session) that counts the reads bringing bytes from the
//! peer into its connection's [`Link`]: anything the peer sends proves it alive, so a
//! busy connection is never pinged, and a PING that waits behind a large response is
//! not taken for silence.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::link::Link;

pin_project! {
    /// `io`, its reads counted in `link`.
    pub(super) struct Heard<T> {
        #[pin]
        io: T,
        link: Arc<Link>,
    }
}

impl<T> Heard<T> {
    pub(super) fn new(io: T, link: Arc<Link>) -> Self {
        Self { io, link }
    }
}

impl<T: AsyncRead> AsyncRead for Heard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let poll = this.io.poll_read(cx, buf);
        if buf.filled().len() > before {
            this.link.note_heard();
        }
        poll
    }
}

impl<T: AsyncWrite> AsyncWrite for Heard<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
