//! HTTP/2 frames written and read byte by byte (RFC 9113 §4.1), for input no HTTP/2
//! library would send: a frame header is a 24-bit length, a type, flags and a 31-bit
//! stream id.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types used here (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Flag END_HEADERS of HEADERS and CONTINUATION.
pub const END_HEADERS: u8 = 0x4;

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The frame type (see [`kind`]).
    pub kind: u8,
    /// Its flags.
    pub flags: u8,
    /// The stream it belongs to; 0 for the connection.
    pub stream: u32,
    /// Its payload.
    pub payload: Bytes,
}

impl Frame {
    /// A frame of `kind` with `payload`.
    pub fn new(kind: u8, flags: u8, stream: u32, payload: impl Into<Bytes>) -> Self {
        Self {
            kind,
            flags,
            stream,
            payload: payload.into(),
        }
    }

    /// The frame on the wire. The length field says `payload.len()`; a caller after a
    /// lying length edits the bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = BytesMut::with_capacity(9 + self.payload.len());
        let length = u32::try_from(self.payload.len()).unwrap_or(u32::MAX);
        bytes.put_slice(&length.to_be_bytes()[1..]);
        bytes.put_u8(self.kind);
        bytes.put_u8(self.flags);
        bytes.put_u32(self.stream & 0x7fff_ffff);
        bytes.put_slice(&self.payload);
        bytes.to_vec()
    }
}

/// The error code of a GOAWAY, as RFC 9113 §7 names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoAway {
    /// The error code (0x1 `PROTOCOL_ERROR`, 0x6 `FRAME_SIZE_ERROR`, 0x9
    /// `COMPRESSION_ERROR`, 0xb `ENHANCE_YOUR_CALM`, ...).
    pub code: u32,
    /// The debug data, as text.
    pub debug: String,
}

/// What a server sent on a connection until it closed it or the bound passed.
#[derive(Clone, Debug, Default)]
pub struct Answer {
    /// The frames, in order; a trailing partial frame is left out.
    pub frames: Vec<Frame>,
    /// Bytes that were not HTTP/2 frames (e.g. an HTTP/1.1 answer), if the first bytes
    /// did not parse as a frame header the server would send.
    pub raw: Vec<u8>,
    /// Whether the server closed the connection (or reset it) within the bound.
    pub closed: bool,
}

impl Answer {
    /// The first GOAWAY the server sent.
    pub fn goaway(&self) -> Option<GoAway> {
        self.frames
            .iter()
            .find(|frame| frame.kind == kind::GOAWAY && frame.payload.len() >= 8)
            .map(|frame| {
                let mut payload = frame.payload.clone();
                let _last_stream = payload.get_u32();
                let code = payload.get_u32();
                GoAway {
                    code,
                    debug: String::from_utf8_lossy(&payload).into_owned(),
                }
            })
    }
}

/// Connects to `addr`, writes `bytes`, and reads what the server sends until it closes
/// the connection or `bound` passes.
///
/// # Errors
/// When the connection cannot be made. A write the server refuses (it closed first) is
/// not an error: its answer is what counts.
pub async fn send_raw(addr: SocketAddr, bytes: &[u8], bound: Duration) -> std::io::Result<Answer> {
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let _ = tcp.write_all(bytes).await;
    Ok(read_answer(tcp, Instant::now() + bound).await)
}

/// Reads what the server sends until it closes the connection or `deadline` passes.
pub(super) async fn read_answer(mut reader: impl AsyncRead + Unpin, deadline: Instant) -> Answer {
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 << 10];
    let closed = loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buffer)).await {
            Err(_elapsed) => break false,
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    };
    parse(received, closed)
}

fn parse(received: Vec<u8>, closed: bool) -> Answer {
    let mut answer = Answer {
        closed,
        ..Answer::default()
    };
    let mut rest = Bytes::from(received);
    while rest.len() >= 9 {
        let length = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        // A server's first frame is SETTINGS (RFC 9113 §3.4); other bytes are not HTTP/2.
        if answer.frames.is_empty() && rest[3] != kind::SETTINGS {
            break;
        }
        if rest.len() < 9 + length {
            break;
        }
        let mut header = rest.split_to(9);
        header.advance(3);
        let kind = header.get_u8();
        let flags = header.get_u8();
        let stream = header.get_u32() & 0x7fff_ffff;
        let payload = rest.split_to(length);
        answer.frames.push(Frame {
            kind,
            flags,
            stream,
            payload,
        });
    }
    if answer.frames.is_empty() {
        answer.raw = rest.to_vec();
    }
    answer
}

/// The preface and an empty SETTINGS frame: a valid start of a client's connection.
pub fn valid_start() -> Vec<u8> {
    let mut bytes = PREFACE.to_vec();
    bytes.extend(Frame::new(kind::SETTINGS, 0, 0, Bytes::new()).encode());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_goaway_is_read() {
        let mut goaway = BytesMut::new();
        goaway.put_u32(0);
        goaway.put_u32(0xb);
        goaway.put_slice(b"calm");
        let bytes = [
            Frame::new(kind::SETTINGS, 0, 0, Bytes::new()).encode(),
            Frame::new(kind::GOAWAY, 0, 0, goaway.freeze()).encode(),
        ]
        .concat();
        let answer = parse(bytes, true);
        assert_eq!(answer.frames.len(), 2);
        assert_eq!(
            answer.goaway(),
            Some(GoAway {
                code: 0xb,
                debug: "calm".into()
            })
        );
        let not_http2 = parse(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), true);
        assert!(not_http2.frames.is_empty());
        assert!(not_http2.raw.starts_with(b"HTTP/1.1"));
    }
}
