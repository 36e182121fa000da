//! An accepted socket (or its TLS session) as HTTP/2 reads it: how far its peer got
//! into HTTP/2 ([`Progress`]: a byte, the whole client preface), and, for a connection
//! accepted during a shutdown, the bytes read ahead while it was held back until its
//! peer sent a request.
//!
//! Why hold a connection back: once a shutdown has begun, a plain gRPC client that was
//! sent GOAWAY dials the same address again at once, and would be served there again —
//! the GOAWAY would move it nowhere, and the wait for consumers would last its whole
//! bound. gRPC's own clients (C-core, hence grpcio; Go; Java) do not use a new
//! connection before the server's SETTINGS frame arrives: a connection that gets none
//! stays "connecting" for them, and they call another address. rpc consumers (hyper,
//! under tonic's channel) send their request without waiting. So a connection accepted
//! during a shutdown is handed to HTTP/2 — which sends SETTINGS first — only once its
//! peer has sent a request; one that never does is closed at the server's shutdown,
//! having carried nothing. The listener itself stays open until then, so an rpc
//! consumer that learns late of this instance's leaving still reaches it and is told
//! so ("closing, not executed") rather than refused a connection.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of an HTTP/2 frame header (RFC 9113 §4.1).
const FRAME_HEADER: usize = 9;
/// The frame type that opens a stream: a request.
const HEADERS: u8 = 0x1;
/// Most bytes read ahead while waiting for a request. A client's preface, SETTINGS and
/// WINDOW_UPDATE take about 100 bytes; a peer that sends 16 KiB of anything else
/// before a request is not a client worth holding a buffer for.
const READ_AHEAD_LIMIT: usize = 16 * 1024;

/// How far the peer of one connection has got into HTTP/2, as the bytes it sent show:
/// noted by the socket that reads them, read by the connection (which times the
/// preface) and by the server's table of connections (which sheds the silent ones
/// first).
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Bytes the peer sent, counted up to the length of the preface.
    received: AtomicUsize,
}

impl Progress {
    /// Whether the peer has sent a byte.
    pub(crate) fn heard(&self) -> bool {
        self.received.load(Ordering::Acquire) > 0
    }

    /// Whether the peer has sent the whole client preface (as many bytes: h2 checks
    /// what they are, and ends a connection whose preface is wrong).
    pub(crate) fn sent_preface(&self) -> bool {
        self.received.load(Ordering::Acquire) >= PREFACE.len()
    }

    /// Notes that the peer has sent `total` bytes so far.
    pub(crate) fn note(&self, total: usize) {
        self.received
            .fetch_max(total.min(PREFACE.len()), Ordering::AcqRel);
    }
}

/// Reads from `stream` until its peer has sent a request (the preface, then a HEADERS
/// frame), and returns every byte read; notes them in `progress` as they arrive.
/// `None` when the peer closed first, sent something that is not HTTP/2, or
/// [`READ_AHEAD_LIMIT`] bytes without a request.
pub(crate) async fn read_until_request<T: AsyncRead + Unpin>(
    stream: &mut T,
    progress: &Progress,
) -> Option<Bytes> {
    let mut read = BytesMut::with_capacity(256);
    loop {
        match first_request(&read) {
            Scan::Request => return Some(read.freeze()),
            Scan::NotHttp2 => return None,
            Scan::NotYet if read.len() >= READ_AHEAD_LIMIT => return None,
            Scan::NotYet => {}
        }
        if stream.read_buf(&mut read).await.ok()? == 0 {
            return None;
        }
        progress.note(read.len());
    }
}

/// What the bytes a peer sent so far show.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    Request,
    NotHttp2,
    NotYet,
}

fn first_request(bytes: &[u8]) -> Scan {
    let preface = PREFACE.len().min(bytes.len());
    if bytes[..preface] != PREFACE[..preface] {
        return Scan::NotHttp2;
    }
    let mut at = PREFACE.len();
    while let Some(header) = bytes.get(at..at + FRAME_HEADER) {
        if header[3] == HEADERS {
            return Scan::Request;
        }
        let length =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        at += FRAME_HEADER + length;
    }
    Scan::NotYet
}

pin_project! {
    /// An accepted socket that replays what was read ahead, and notes how far its peer
    /// got into HTTP/2.
    pub(crate) struct PeerSocket<T> {
        #[pin]
        stream: T,
        read_ahead: Bytes,
        // Bytes received, counted until the preface is complete: past it, a read
        // costs no atomic operation.
        received: usize,
        progress: Arc<Progress>,
    }
}

impl<T> PeerSocket<T> {
    /// `stream`, whose first bytes were `read_ahead` (empty if none were read); what
    /// the peer sends is noted in `progress`.
    pub(crate) fn new(stream: T, read_ahead: Bytes, progress: Arc<Progress>) -> Self {
        let received = read_ahead.len().min(PREFACE.len());
        progress.note(received);
        Self {
            stream,
            read_ahead,
            received,
            progress,
        }
    }
}

impl<T: AsyncRead> AsyncRead for PeerSocket<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        if !this.read_ahead.is_empty() {
            let n = this.read_ahead.len().min(buf.remaining());
            buf.put_slice(&this.read_ahead[..n]);
            this.read_ahead.advance(n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let poll = this.stream.poll_read(cx, buf);
        if *this.received < PREFACE.len() && buf.filled().len() > before {
            *this.received += buf.filled().len() - before;
            this.progress.note(*this.received);
        }
        poll
    }
}

impl<T: AsyncWrite> AsyncWrite for PeerSocket<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().stream.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;

    fn frame(kind: u8, length: usize) -> Vec<u8> {
        let mut frame = vec![
            (length >> 16) as u8,
            (length >> 8) as u8,
            length as u8,
            kind,
            0,
        ];
        frame.extend([0, 0, 0, 0]);
        frame.extend(std::iter::repeat_n(0, length));
        frame
    }

    #[test]
    fn a_request_is_the_first_headers_frame_after_the_preface() {
        let mut bytes = PREFACE[..10].to_vec();
        assert_eq!(first_request(&bytes), Scan::NotYet);
        bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 6)); // SETTINGS
        bytes.extend(frame(0x8, 4)); // WINDOW_UPDATE
        assert_eq!(first_request(&bytes), Scan::NotYet);
        bytes.extend(&frame(HEADERS, 20)[..FRAME_HEADER]);
        assert_eq!(first_request(&bytes), Scan::Request);
        assert_eq!(first_request(b"GET / HTTP/1.1\r\n"), Scan::NotHttp2);
    }

    #[tokio::test]
    async fn the_preface_counts_as_sent_once_all_its_bytes_arrived() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let progress = Arc::new(Progress::default());
        let mut socket = PeerSocket::new(ours, Bytes::new(), progress.clone());
        assert!(!progress.heard());
        let mut read = [0u8; 64];
        theirs.write_all(&PREFACE[..10]).await.unwrap();
        assert_eq!(socket.read(&mut read).await.unwrap(), 10);
        assert!(progress.heard() && !progress.sent_preface());
        theirs.write_all(&PREFACE[10..]).await.unwrap();
        socket
            .read_exact(&mut read[..PREFACE.len() - 10])
            .await
            .unwrap();
        assert!(progress.sent_preface());

        // Bytes read ahead during a shutdown's hold count as sent.
        let (ours, _theirs) = tokio::io::duplex(64);
        let progress = Arc::new(Progress::default());
        let _socket = PeerSocket::new(ours, Bytes::from_static(PREFACE), progress.clone());
        assert!(progress.sent_preface());
    }

    #[tokio::test]
    async fn what_was_read_ahead_is_read_again_first() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut accepted, _) = listener.accept().await.unwrap();
        let mut request = PREFACE.to_vec();
        request.extend(frame(0x4, 0));
        request.extend(frame(HEADERS, 3));
        tokio::io::AsyncWriteExt::write_all(&mut client, &request)
            .await
            .unwrap();
        let progress = Arc::new(Progress::default());
        let read = read_until_request(&mut accepted, &progress).await.unwrap();
        assert!(progress.sent_preface());
        assert!(request.starts_with(&read) && read.len() >= PREFACE.len() + 2 * FRAME_HEADER);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"!")
            .await
            .unwrap();
        let mut socket = PeerSocket::new(accepted, read, progress);
        let mut replayed = vec![0; request.len() + 1];
        socket.read_exact(&mut replayed).await.unwrap();
        assert_eq!(&replayed[..request.len()], &request[..]);
        assert_eq!(replayed[request.len()], b'!');
    }
}
