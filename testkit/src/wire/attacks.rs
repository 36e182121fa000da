//! The bad input of issue 12's rule 5, one function each: bytes that are not HTTP/2,
//! malformed frames, and the floods (rapid reset, large header lists, CONTINUATION).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::time::Instant;

use tokio::io::AsyncWriteExt;

use super::frames::{Answer, END_HEADERS, Frame, kind, read_answer, valid_start};
use super::grpc;

/// Bytes that are not HTTP/2: an HTTP/1.1 request where the preface belongs.
pub fn not_http2() -> Vec<u8> {
    b"GET / HTTP/1.1\r\nHost: provider\r\n\r\n".to_vec()
}

/// A malformed frame after a valid start of a connection, and the connection error
/// RFC 9113 names for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// A frame longer than `SETTINGS_MAX_FRAME_SIZE` (16 KiB unless raised):
    /// `FRAME_SIZE_ERROR` (0x6, §4.2).
    FrameOverMaxSize,
    /// A PING whose payload is 7 bytes, not 8. RFC 9113 §6.7 names `FRAME_SIZE_ERROR`;
    /// h2 (hyper's HTTP/2) answers `PROTOCOL_ERROR` (0x1): a connection error either way.
    PingOfSevenBytes,
    /// A DATA frame on stream 0: `PROTOCOL_ERROR` (0x1, §6.1).
    DataOnStreamZero,
    /// A header block that is not HPACK (an index past every table). RFC 9113 §4.3
    /// names `COMPRESSION_ERROR` (0x9); h2 answers `PROTOCOL_ERROR` (0x1).
    HeaderBlockNotHpack,
}

impl Malformed {
    /// Every case.
    pub const ALL: [Self; 4] = [
        Self::FrameOverMaxSize,
        Self::PingOfSevenBytes,
        Self::DataOnStreamZero,
        Self::HeaderBlockNotHpack,
    ];

    /// The GOAWAY error code RFC 9113 names for it, and the one h2 (hyper's HTTP/2)
    /// sends where it differs: a connection error with a GOAWAY either way.
    pub fn expected_codes(self) -> (u32, u32) {
        match self {
            Self::FrameOverMaxSize => (0x6, 0x6),
            Self::PingOfSevenBytes => (0x6, 0x1),
            Self::DataOnStreamZero => (0x1, 0x1),
            Self::HeaderBlockNotHpack => (0x9, 0x1),
        }
    }

    /// The bytes of the connection: a valid start, then the malformed frame.
    pub fn bytes(self) -> Vec<u8> {
        let frame = match self {
            Self::FrameOverMaxSize => Frame::new(kind::DATA, 0, 1, vec![0u8; (16 << 10) + 1]),
            Self::PingOfSevenBytes => Frame::new(kind::PING, 0, 0, vec![0u8; 7]),
            Self::DataOnStreamZero => Frame::new(kind::DATA, 0, 0, vec![0u8; 8]),
            // END_STREAM | END_HEADERS; 0xff 0xff.. is an indexed field whose index runs
            // past the static and the (empty) dynamic table.
            Self::HeaderBlockNotHpack => Frame::new(kind::HEADERS, 0x5, 1, vec![0xffu8; 6]),
        };
        [valid_start(), frame.encode()].concat()
    }
}

/// A CONTINUATION flood (CVE-2024-27316): a HEADERS frame without END_HEADERS, then
/// `count` CONTINUATION frames of one indexed header each, never ending the block.
pub fn continuation_flood(count: usize) -> Vec<u8> {
    // 0x82 0x86 0x84: `:method: GET`, `:scheme: http`, `:path: /` from the static table;
    // 0x90: `accept-encoding: gzip, deflate`, a regular header that may repeat.
    let mut bytes = valid_start();
    bytes.extend(Frame::new(kind::HEADERS, 0, 1, vec![0x82, 0x86, 0x84]).encode());
    for _ in 0..count {
        bytes.extend(Frame::new(kind::CONTINUATION, 0, 1, vec![0x90]).encode());
    }
    bytes.extend(Frame::new(kind::CONTINUATION, END_HEADERS, 1, vec![0x90]).encode());
    bytes
}

/// How a flood's connection or stream was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FloodAnswer {
    /// The stream got an HTTP response with this status (e.g. 431).
    Status(http::StatusCode),
    /// The stream was reset with this reason.
    Reset(h2::Reason),
    /// The connection was closed with a GOAWAY of this reason.
    GoAway(h2::Reason),
    /// Something else (an I/O error), in words.
    Other(String),
}

fn answer_of(error: &h2::Error) -> FloodAnswer {
    match error.reason() {
        Some(reason) if error.is_go_away() => FloodAnswer::GoAway(reason),
        Some(reason) => FloodAnswer::Reset(reason),
        None => FloodAnswer::Other(error.to_string()),
    }
}

/// What a rapid-reset flood did.
#[derive(Clone, Debug)]
pub struct RapidReset {
    /// Streams opened (each reset at once) before the server closed the connection or
    /// the flood ended.
    pub opened: usize,
    /// What the server sent meanwhile, and whether it closed the connection.
    pub answer: Answer,
}

/// The header block of a gRPC request of `path` (HPACK, RFC 7541): `:method: POST`,
/// `:scheme: http`, `:path`, `content-type: application/grpc`, `te: trailers`, literals
/// never indexed so every block is independent of the last.
fn request_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86];
    let literal = |block: &mut Vec<u8>, value: &[u8]| {
        // Lengths under 127 fit the 7-bit prefix of an HPACK string.
        block.push(u8::try_from(value.len().min(126)).unwrap_or(126));
        block.extend_from_slice(&value[..value.len().min(126)]);
    };
    // `:path` (static index 4), literal value, not indexed.
    block.push(0x04);
    literal(&mut block, path.as_bytes());
    // `content-type` (static index 31: 15 in the 4-bit prefix, then 16).
    block.extend([0x0f, 0x10]);
    literal(&mut block, b"application/grpc");
    // `te`, a new name.
    block.push(0x00);
    literal(&mut block, b"te");
    literal(&mut block, b"trailers");
    block
}

/// The rapid-reset flood (CVE-2023-44487), as an attacker sends it: on one connection,
/// HEADERS for a new stream of `path` and at once RST_STREAM(`CANCEL`) for it, `streams`
/// times without waiting for any answer, while the server's frames are read. Ends when
/// every stream was sent, the server closed the connection, or `bound` passed.
///
/// # Errors
/// When the connection cannot be made.
pub async fn rapid_reset(
    addr: SocketAddr,
    path: &str,
    streams: usize,
    bound: Duration,
) -> std::io::Result<RapidReset> {
    const BATCH: usize = 100;
    let deadline = Instant::now() + bound;
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (reader, mut writer) = tcp.into_split();
    let reading = tokio::spawn(read_answer(reader, deadline));
    let block = request_block(path);
    let cancel = 0x8u32.to_be_bytes().to_vec();
    let _ = writer.write_all(&valid_start()).await;
    let mut opened = 0;
    while opened < streams && Instant::now() < deadline {
        let mut bytes = Vec::with_capacity(BATCH * (block.len() + 32));
        for _ in 0..BATCH.min(streams - opened) {
            // Client streams are odd: 1, 3, 5, ...
            let stream = u32::try_from(2 * opened + 1).unwrap_or(u32::MAX);
            bytes.extend(Frame::new(kind::HEADERS, END_HEADERS, stream, block.clone()).encode());
            bytes.extend(Frame::new(kind::RST_STREAM, 0, stream, cancel.clone()).encode());
            opened += 1;
        }
        if writer.write_all(&bytes).await.is_err() {
            break;
        }
    }
    // Half-close: a server that kept the connection open ends it now, and the read ends.
    let _ = writer.shutdown().await;
    let answer = reading.await.unwrap_or_default();
    Ok(RapidReset { opened, answer })
}

/// One request of `path` whose header list is about `bytes` long (headers of 100 bytes
/// each), answered as the server chose.
///
/// # Errors
/// When no HTTP/2 connection can be made.
pub async fn large_header_list(
    addr: SocketAddr,
    path: &str,
    bytes: usize,
) -> Result<FloodAnswer, String> {
    let mut client = grpc::connect(addr).await?;
    let mut request = grpc::request(addr, path);
    let value = http::HeaderValue::from_static(
        "flood-flood-flood-flood-flood-flood-flood-flood-flood-flood-flood-flood-flood-flood",
    );
    for i in 0..bytes / 100 {
        let name = http::HeaderName::try_from(format!("x-flood-{i:08}"))
            .map_err(|e| format!("header name: {e}"))?;
        request.headers_mut().insert(name, value.clone());
    }
    let (response, mut send) = match client.send_request(request, false) {
        Ok(sent) => sent,
        Err(error) => return Ok(answer_of(&error)),
    };
    let _ = send.send_data(Bytes::new(), true);
    Ok(match response.await {
        Ok(response) => FloodAnswer::Status(response.status()),
        Err(error) => answer_of(&error),
    })
}
