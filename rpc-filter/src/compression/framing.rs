//! A body's bytes, message by message: each gRPC message is compressed or
//! decompressed whole, at most one message buffered at a time, and everything else
//! passes as it came.
//!
//! HTTP/2 cuts a body into frames wherever it likes, so a message may span frames and a
//! frame may hold several messages; the [`Transcoder`] reads the 5-byte prefixes across
//! those cuts. A message it leaves alone is forwarded as its bytes arrive (zero-copy
//! slices of the input), never buffered; one it transforms is collected (growing with
//! what arrived, not with what its prefix declares) and sent transformed once complete.

use bytes::{Buf, Bytes, BytesMut};
use tonic::Status;

use super::codec::{self, PREFIX_LEN};
use super::encoding::Encoding;
use super::request_encoding::RequestEncoding;

/// The most bytes reserved for a message before its bytes arrive: a prefix that
/// declares 4 MiB costs no 4 MiB until they come.
const INITIAL_RESERVE: usize = 64 << 10;

/// Which way a body's messages are transformed.
#[derive(Clone, Debug)]
pub(crate) enum Direction {
    /// Compress each uncompressed message of at most `max_buffered` bytes; larger ones,
    /// and any already compressed, pass unchanged (gRPC lets any message of a
    /// compressed call go uncompressed).
    Compress {
        encoding: Encoding,
        max_buffered: usize,
    },
    /// Decompress each compressed message, to at most `max_decoded` bytes (a compressed
    /// form larger than that is refused before it is buffered); uncompressed ones pass
    /// unchanged. `record` is told each message's flag.
    Decompress {
        encoding: Encoding,
        max_decoded: usize,
        record: Option<RequestEncoding>,
    },
}

/// Where the reader is in the framing.
#[derive(Debug)]
enum State {
    /// Reading a prefix (`prefix_len` bytes of it so far).
    Prefix,
    /// Forwarding the `left` bytes remaining of a message left alone.
    Pass { left: usize },
    /// Collecting a message of `length` bytes to transform.
    Collect { length: usize, message: BytesMut },
}

/// Transforms a body's messages in one [`Direction`], fed the body's data chunk by
/// chunk.
#[derive(Debug)]
pub(crate) struct Transcoder {
    direction: Direction,
    prefix: [u8; PREFIX_LEN],
    prefix_len: usize,
    state: State,
}

impl Transcoder {
    pub(crate) fn new(direction: Direction) -> Self {
        Self {
            direction,
            prefix: [0; PREFIX_LEN],
            prefix_len: 0,
            state: State::Prefix,
        }
    }

    /// Takes the next chunk of the body; returns what is ready to send (`None` when the
    /// chunk only began a message being collected).
    ///
    /// # Errors
    /// The status that ends the call: `RESOURCE_EXHAUSTED` for a message over the
    /// decoding limit, `INTERNAL` for one that does not decompress.
    pub(crate) fn push(&mut self, mut chunk: Bytes) -> Result<Option<Bytes>, Status> {
        let mut out = Vec::new();
        while !chunk.is_empty() {
            match &mut self.state {
                State::Prefix => {
                    let take = (PREFIX_LEN - self.prefix_len).min(chunk.len());
                    self.prefix[self.prefix_len..self.prefix_len + take]
                        .copy_from_slice(&chunk[..take]);
                    self.prefix_len += take;
                    chunk.advance(take);
                    if self.prefix_len == PREFIX_LEN {
                        self.prefix_len = 0;
                        self.begin_message(&mut out)?;
                    }
                }
                State::Pass { left } => {
                    let take = (*left).min(chunk.len());
                    out.push(chunk.split_to(take));
                    *left -= take;
                    if *left == 0 {
                        self.state = State::Prefix;
                    }
                }
                State::Collect { length, message } => {
                    let length = *length;
                    let whole = if message.is_empty() && chunk.len() >= length {
                        // The whole message is in this chunk (a unary call's usual
                        // case): transform it where it lies.
                        chunk.split_to(length)
                    } else {
                        let take = (length - message.len()).min(chunk.len());
                        message.extend_from_slice(&chunk.split_to(take));
                        if message.len() < length {
                            continue;
                        }
                        std::mem::take(message).freeze()
                    };
                    self.state = State::Prefix;
                    out.push(self.transform(&whole)?);
                }
            }
        }
        Ok(joined(out))
    }

    /// Whether the body may end here: between two messages.
    pub(crate) fn between_messages(&self) -> bool {
        matches!(self.state, State::Prefix) && self.prefix_len == 0
    }

    /// The status of a body that ended inside a message.
    pub(crate) fn cut_short() -> Status {
        Status::internal("the body ended inside a gRPC message")
    }

    /// A complete prefix was read: decides whether its message is transformed.
    fn begin_message(&mut self, out: &mut Vec<Bytes>) -> Result<(), Status> {
        let [flag, a, b, c, d] = self.prefix;
        let length = u32::from_be_bytes([a, b, c, d]) as usize;
        let transform = match &self.direction {
            Direction::Compress { max_buffered, .. } => flag == 0 && length <= *max_buffered,
            Direction::Decompress {
                encoding,
                max_decoded,
                record,
            } => {
                if let Some(record) = record {
                    record.record(flag == 1);
                }
                if flag == 1 && length > *max_decoded {
                    return Err(codec::too_large(*encoding, *max_decoded));
                }
                flag == 1
            }
        };
        if !transform {
            out.push(Bytes::copy_from_slice(&self.prefix));
            self.state = match length {
                0 => State::Prefix,
                left => State::Pass { left },
            };
            return Ok(());
        }
        if length == 0 {
            out.push(self.transform(&[])?);
            return Ok(());
        }
        self.state = State::Collect {
            length,
            message: BytesMut::with_capacity(length.min(INITIAL_RESERVE)),
        };
        Ok(())
    }

    /// One whole message (without its prefix), transformed, with its new prefix.
    fn transform(&self, message: &[u8]) -> Result<Bytes, Status> {
        match &self.direction {
            Direction::Compress { encoding, .. } => codec::compress(*encoding, message),
            Direction::Decompress {
                encoding,
                max_decoded,
                ..
            } => codec::decompress(*encoding, message, *max_decoded),
        }
    }
}

/// What one input chunk produced, as one chunk (a unary body stays one frame, which is
/// what the cluster's replay buffer keeps without a copy).
fn joined(mut out: Vec<Bytes>) -> Option<Bytes> {
    match out.len() {
        0 => None,
        1 => out.pop(),
        _ => {
            let mut all = BytesMut::with_capacity(out.iter().map(Bytes::len).sum());
            for part in out {
                all.extend_from_slice(&part);
            }
            Some(all.freeze())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn framed(compressed: bool, message: &[u8]) -> Vec<u8> {
        let mut bytes = vec![u8::from(compressed)];
        bytes.extend_from_slice(&(message.len() as u32).to_be_bytes());
        bytes.extend_from_slice(message);
        bytes
    }

    fn compressing() -> Transcoder {
        Transcoder::new(Direction::Compress {
            encoding: Encoding::Gzip,
            max_buffered: 1 << 20,
        })
    }

    fn decompressing(max_decoded: usize, record: Option<RequestEncoding>) -> Transcoder {
        Transcoder::new(Direction::Decompress {
            encoding: Encoding::Gzip,
            max_decoded,
            record,
        })
    }

    /// Feeds `bytes` in chunks of `size` and returns everything sent.
    fn feed(transcoder: &mut Transcoder, bytes: &[u8], size: usize) -> Result<Vec<u8>, Status> {
        let mut sent = Vec::new();
        for chunk in bytes.chunks(size) {
            if let Some(out) = transcoder.push(Bytes::copy_from_slice(chunk))? {
                sent.extend_from_slice(&out);
            }
        }
        Ok(sent)
    }

    /// The messages of `bytes`: (compressed flag, bytes).
    fn messages(mut bytes: &[u8]) -> Vec<(bool, Vec<u8>)> {
        let mut messages = Vec::new();
        while !bytes.is_empty() {
            let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
            messages.push((bytes[0] == 1, bytes[5..5 + length].to_vec()));
            bytes = &bytes[5 + length..];
        }
        messages
    }

    #[test]
    fn messages_round_trip_across_any_cut_of_the_body() {
        let originals: Vec<Vec<u8>> = vec![
            b"first ".repeat(300),
            Vec::new(),
            b"third".to_vec(),
            vec![9; 70_000],
        ];
        let body: Vec<u8> = originals.iter().flat_map(|m| framed(false, m)).collect();
        for size in [1, 3, 5, 7, 4096, body.len()] {
            let mut compressor = compressing();
            let compressed = feed(&mut compressor, &body, size).unwrap();
            assert!(compressor.between_messages());
            let sent = messages(&compressed);
            assert_eq!(sent.len(), originals.len());
            assert!(
                sent.iter().all(|(flag, _)| *flag),
                "every message compressed"
            );
            let record = RequestEncoding::new(Encoding::Gzip);
            let mut decompressor = decompressing(1 << 20, Some(record.clone()));
            let decompressed = feed(&mut decompressor, &compressed, size).unwrap();
            assert!(decompressor.between_messages());
            assert_eq!(decompressed, body, "chunks of {size}");
            for _ in &originals {
                assert_eq!(record.next_message_compressed(), Some(true));
            }
            assert_eq!(record.next_message_compressed(), None);
        }
    }

    #[test]
    fn a_whole_unary_message_in_one_chunk_comes_out_as_one_chunk() {
        let mut compressor = compressing();
        let out = compressor
            .push(Bytes::from(framed(false, &b"unary".repeat(100))))
            .unwrap()
            .unwrap();
        assert_eq!(messages(&out).len(), 1);
    }

    #[test]
    fn uncompressed_messages_pass_through_a_decompressor_unbuffered() {
        let record = RequestEncoding::new(Encoding::Gzip);
        let mut decompressor = decompressing(16, Some(record.clone()));
        // Larger than the limit, but not compressed: not this filter's to refuse (the
        // transport's message limits and tonic's decoder bound uncompressed messages).
        let plain = framed(false, &[1; 100]);
        let first = decompressor
            .push(Bytes::copy_from_slice(&plain[..10]))
            .unwrap();
        assert_eq!(first.as_deref(), Some(&plain[..10]), "forwarded as it came");
        let rest = decompressor
            .push(Bytes::copy_from_slice(&plain[10..]))
            .unwrap();
        assert_eq!(rest.as_deref(), Some(&plain[10..]));
        assert_eq!(record.next_message_compressed(), Some(false));
    }

    #[test]
    fn messages_over_the_buffer_bound_are_sent_uncompressed() {
        let mut compressor = Transcoder::new(Direction::Compress {
            encoding: Encoding::Zstd,
            max_buffered: 10,
        });
        let body = [framed(false, &[5; 11]), framed(false, &[5; 10])].concat();
        let sent = messages(&feed(&mut compressor, &body, 4).unwrap());
        assert_eq!(sent[0], (false, vec![5; 11]));
        assert!(sent[1].0);
    }

    #[test]
    fn a_compressed_message_declared_over_the_limit_is_refused_before_buffering() {
        let mut decompressor = decompressing(1000, None);
        let mut prefix = vec![1];
        prefix.extend_from_slice(&1001u32.to_be_bytes());
        let status = decompressor.push(Bytes::from(prefix)).unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
    }

    #[test]
    fn a_bomb_inside_the_framing_is_resource_exhausted() {
        let bomb = codec::compress(Encoding::Gzip, &vec![0; 8 << 20]).unwrap();
        let mut decompressor = decompressing(1 << 20, None);
        let status = feed(&mut decompressor, &bomb, 1000).unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
    }

    #[test]
    fn garbage_behind_the_compressed_flag_is_internal() {
        let mut decompressor = decompressing(1 << 20, None);
        let status = decompressor
            .push(Bytes::from(framed(true, b"this is not gzip")))
            .unwrap_err();
        assert_eq!(status.code(), Code::Internal);
    }

    #[test]
    fn a_body_cut_inside_a_message_is_noticed() {
        let mut decompressor = decompressing(1 << 20, None);
        let compressed = codec::compress(Encoding::Gzip, b"cut").unwrap();
        decompressor.push(compressed.slice(..7)).unwrap();
        assert!(!decompressor.between_messages());
        let mut prefix_only = compressing();
        prefix_only.push(Bytes::from_static(&[0, 0])).unwrap();
        assert!(!prefix_only.between_messages());
    }
}
