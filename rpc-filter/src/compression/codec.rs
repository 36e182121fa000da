//! One gRPC message compressed or decompressed, with the 5-byte prefix it travels
//! under (gRPC over HTTP/2, "Length-Prefixed-Message": a flag byte whose bit 0 says
//! "compressed", then the big-endian 32-bit length).
//!
//! Decompression is bounded: the output is read through a limit one byte past the
//! largest message allowed, so a small message that would inflate to gigabytes (a
//! decompression bomb) stops at the limit, having cost at most that much memory.
//! zstd's window is bounded the same way, as its decoder would otherwise allocate what
//! a frame header declares (up to 128 MiB by default).

use std::io::{Read, Write};

use bytes::Bytes;
use tonic::Status;

use super::encoding::Encoding;

/// Bytes of a message's prefix: the compressed flag and the 32-bit length.
pub(crate) const PREFIX_LEN: usize = 5;

/// zstd's window never needs to exceed the largest message; this floor is the window
/// the zstd format asks every decoder to support (8 MiB), so an encoder with ordinary
/// settings is never refused.
const MIN_ZSTD_WINDOW_LOG: u32 = 23;

/// zstd's own ceiling on the window (64-bit builds).
const MAX_ZSTD_WINDOW_LOG: u32 = 31;

/// `message` compressed with `encoding`, behind a prefix with the compressed flag set.
///
/// # Errors
/// `INTERNAL` if the compressor fails or the result does not fit a 32-bit length.
pub(crate) fn compress(encoding: Encoding, message: &[u8]) -> Result<Bytes, Status> {
    let framed = Vec::with_capacity(PREFIX_LEN + message.len() / 2 + 64);
    let mut framed = match encoding {
        Encoding::Gzip => gzip(prefixed(framed), message),
        Encoding::Zstd => zstd(prefixed(framed), message),
    }
    .map_err(|error| {
        Status::internal(format!("{} compression failed: {error}", encoding.name()))
    })?;
    set_prefix(&mut framed, true)?;
    Ok(Bytes::from(framed))
}

/// `message` (the compressed bytes, without their prefix) decompressed with
/// `encoding`, behind a prefix with the compressed flag clear.
///
/// # Errors
/// `RESOURCE_EXHAUSTED` when it decompresses to more than `limit` bytes (nothing past
/// the limit is read); `INTERNAL` when it is not valid `encoding` data.
pub(crate) fn decompress(
    encoding: Encoding,
    message: &[u8],
    limit: usize,
) -> Result<Bytes, Status> {
    let bound = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut framed = prefixed(Vec::with_capacity(
        PREFIX_LEN + message.len().saturating_mul(2).min(limit),
    ));
    let read = match encoding {
        Encoding::Gzip => flate2::read::GzDecoder::new(message)
            .take(bound)
            .read_to_end(&mut framed),
        Encoding::Zstd => zstd_decoder(message, limit)
            .and_then(|decoder| decoder.take(bound).read_to_end(&mut framed)),
    };
    if let Err(error) = read {
        return Err(Status::internal(format!(
            "a {} message could not be decompressed: {error}",
            encoding.name()
        )));
    }
    if framed.len() - PREFIX_LEN > limit {
        return Err(too_large(encoding, limit));
    }
    set_prefix(&mut framed, false)?;
    Ok(Bytes::from(framed))
}

/// The status of a message that decompresses past `limit` (or whose compressed form is
/// already larger): the decoding limit, as gRPC's status code list names it.
pub(crate) fn too_large(encoding: Encoding, limit: usize) -> Status {
    Status::resource_exhausted(format!(
        "a {} message decompresses to more than the limit of {limit} bytes (protocol.max_decoding_message_size)",
        encoding.name()
    ))
}

fn prefixed(mut buffer: Vec<u8>) -> Vec<u8> {
    buffer.extend_from_slice(&[0; PREFIX_LEN]);
    buffer
}

/// Writes the prefix of `framed` (a message behind [`PREFIX_LEN`] reserved bytes).
fn set_prefix(framed: &mut [u8], compressed: bool) -> Result<(), Status> {
    let length = u32::try_from(framed.len() - PREFIX_LEN)
        .map_err(|_| Status::internal("a message does not fit gRPC's 32-bit length"))?;
    framed[0] = u8::from(compressed);
    framed[1..PREFIX_LEN].copy_from_slice(&length.to_be_bytes());
    Ok(())
}

fn gzip(out: Vec<u8>, message: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    encoder.write_all(message)?;
    encoder.finish()
}

fn zstd(out: Vec<u8>, message: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = zstd::stream::write::Encoder::new(out, zstd::DEFAULT_COMPRESSION_LEVEL)?;
    // The frame says how large the message is, so the reader can size its window.
    encoder.set_pledged_src_size(u64::try_from(message.len()).ok())?;
    encoder.write_all(message)?;
    encoder.finish()
}

/// A zstd reader of `message` whose window is at most what a message of `limit` bytes
/// can use (never less than the format's recommended 8 MiB).
fn zstd_decoder(message: &[u8], limit: usize) -> std::io::Result<impl Read + '_> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(message)?;
    let needed = usize::BITS - limit.saturating_sub(1).leading_zeros();
    decoder.window_log_max(needed.clamp(MIN_ZSTD_WINDOW_LOG, MAX_ZSTD_WINDOW_LOG))?;
    Ok(decoder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn unprefixed(framed: &Bytes) -> (bool, &[u8]) {
        let length = u32::from_be_bytes([framed[1], framed[2], framed[3], framed[4]]) as usize;
        assert_eq!(
            framed.len(),
            PREFIX_LEN + length,
            "the prefix states the length"
        );
        (framed[0] == 1, &framed[PREFIX_LEN..])
    }

    #[test]
    fn gzip_and_zstd_round_trip_with_the_flag() {
        let message = b"hello, hello, hello, hello, hello, hello".repeat(50);
        for encoding in [Encoding::Gzip, Encoding::Zstd] {
            let compressed = compress(encoding, &message).unwrap();
            let (flag, body) = unprefixed(&compressed);
            assert!(flag, "{encoding:?}: the compressed flag is set");
            assert!(
                body.len() < message.len() / 10,
                "{encoding:?}: it compressed"
            );
            let decompressed = decompress(encoding, body, message.len()).unwrap();
            let (flag, body) = unprefixed(&decompressed);
            assert!(!flag, "{encoding:?}: the compressed flag is clear");
            assert_eq!(body, &message[..], "{encoding:?}");
        }
    }

    #[test]
    fn gzip_is_what_other_implementations_read() {
        let compressed = compress(Encoding::Gzip, b"plain gzip").unwrap();
        let mut read = String::new();
        flate2::read::GzDecoder::new(&compressed[PREFIX_LEN..])
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "plain gzip");
        let compressed = compress(Encoding::Zstd, b"plain zstd").unwrap();
        assert_eq!(
            zstd::decode_all(&compressed[PREFIX_LEN..]).unwrap(),
            b"plain zstd"
        );
    }

    #[test]
    fn an_empty_message_round_trips() {
        for encoding in [Encoding::Gzip, Encoding::Zstd] {
            let compressed = compress(encoding, b"").unwrap();
            let decompressed = decompress(encoding, &compressed[PREFIX_LEN..], 0).unwrap();
            assert_eq!(&decompressed[..], &[0, 0, 0, 0, 0]);
        }
    }

    #[test]
    fn a_decompression_bomb_stops_at_the_limit() {
        // 64 MiB of zeros compress to about 64 KiB (gzip) or a few KiB (zstd).
        let bomb = vec![0u8; 64 << 20];
        for encoding in [Encoding::Gzip, Encoding::Zstd] {
            let compressed = compress(encoding, &bomb).unwrap();
            assert!(
                compressed.len() < 100 << 10,
                "{encoding:?}: {}",
                compressed.len()
            );
            let status = decompress(encoding, &compressed[PREFIX_LEN..], 4 << 20).unwrap_err();
            assert_eq!(status.code(), Code::ResourceExhausted, "{encoding:?}");
            assert!(status.message().contains("4194304"), "{status:?}");
            // At the exact size it passes.
            let exact = compress(encoding, &bomb[..1 << 20]).unwrap();
            assert!(decompress(encoding, &exact[PREFIX_LEN..], 1 << 20).is_ok());
            assert_eq!(
                decompress(encoding, &exact[PREFIX_LEN..], (1 << 20) - 1)
                    .unwrap_err()
                    .code(),
                Code::ResourceExhausted
            );
        }
    }

    #[test]
    fn malformed_data_is_internal_not_a_panic() {
        for encoding in [Encoding::Gzip, Encoding::Zstd] {
            for garbage in [&b"not compressed at all"[..], b"", &[0x1f, 0x8b, 8, 0, 0]] {
                let status = decompress(encoding, garbage, 1 << 20).unwrap_err();
                assert_eq!(status.code(), Code::Internal, "{encoding:?} {garbage:?}");
            }
            // A valid message cut short.
            let compressed = compress(encoding, &b"truncated ".repeat(100)).unwrap();
            let cut = &compressed[PREFIX_LEN..compressed.len() - 4];
            assert_eq!(
                decompress(encoding, cut, 1 << 20).unwrap_err().code(),
                Code::Internal,
                "{encoding:?}"
            );
        }
    }

    #[test]
    fn a_zstd_frame_asking_for_a_huge_window_is_refused() {
        // A frame compressed with a 1 GiB window (long-distance matching, as `zstd
        // --long=30` does): reading it would need that window, over the bound.
        let message = vec![7u8; 64 << 10];
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder.long_distance_matching(true).unwrap();
        encoder.window_log(30).unwrap();
        encoder.write_all(&message).unwrap();
        let compressed = encoder.finish().unwrap();
        let status = decompress(Encoding::Zstd, &compressed, 4 << 20).unwrap_err();
        assert_eq!(status.code(), Code::Internal, "{status:?}");
    }
}
