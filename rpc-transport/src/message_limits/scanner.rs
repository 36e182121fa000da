//! Finding the length of each gRPC message in a body, however the body is cut into
//! chunks.
//!
//! A gRPC body is a sequence of length-prefixed messages: one flag byte (compressed or
//! not), a 4-byte big-endian length, then that many bytes ("Length-Prefixed-Message" in
//! gRPC's PROTOCOL-HTTP2.md). The scanner reads only the prefixes and skips the messages,
//! so checking a limit costs no copy and no buffer.

/// Bytes of a message's prefix: the compressed flag and the 32-bit length.
const PREFIX_LEN: usize = 5;

/// A message whose prefix declares more bytes than the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Oversized {
    /// Where the message's prefix starts in the chunk that completed the prefix: the
    /// bytes before it belong to earlier, accepted messages. 0 when the prefix began in
    /// an earlier chunk.
    pub(super) at: usize,
    /// The length the prefix declares, in bytes.
    pub(super) length: usize,
}

/// Walks the messages of one body, chunk by chunk, and reports the first one declared
/// over `limit` bytes.
#[derive(Debug)]
pub(super) struct MessageScanner {
    limit: usize,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Reading a prefix: `seen` of its bytes so far.
    Prefix {
        seen: usize,
        bytes: [u8; PREFIX_LEN],
    },
    /// Skipping a message: this many of its bytes are still to come.
    Message { remaining: usize },
    /// A message over the limit was found: the rest of the body is not read.
    Stopped,
}

impl MessageScanner {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit,
            state: State::Prefix {
                seen: 0,
                bytes: [0; PREFIX_LEN],
            },
        }
    }

    /// Reads the next chunk of the body; the first message over the limit, if this chunk
    /// completes its prefix. After one is reported, the rest of the body is not scanned.
    pub(super) fn scan(&mut self, chunk: &[u8]) -> Option<Oversized> {
        let mut offset = 0;
        // At a message boundary with a whole prefix in the chunk (a unary message, or
        // the many small messages of a stream's frame): the prefix is read in place and
        // the message skipped without a step through the states.
        while let State::Prefix { seen: 0, .. } = self.state
            && let [_, a, b, c, d, ..] = chunk[offset..]
        {
            let length = usize::try_from(u32::from_be_bytes([a, b, c, d])).unwrap_or(usize::MAX);
            if length > self.limit {
                self.state = State::Stopped;
                return Some(Oversized { at: offset, length });
            }
            let rest = chunk.len() - offset - PREFIX_LEN;
            if length > rest {
                self.state = State::Message {
                    remaining: length - rest,
                };
                return None;
            }
            offset += PREFIX_LEN + length;
        }
        while offset < chunk.len() {
            match &mut self.state {
                State::Stopped => return None,
                State::Message { remaining } => {
                    let skipped = (*remaining).min(chunk.len() - offset);
                    *remaining -= skipped;
                    offset += skipped;
                    if *remaining == 0 {
                        self.state = State::Prefix {
                            seen: 0,
                            bytes: [0; PREFIX_LEN],
                        };
                    }
                }
                State::Prefix { seen, bytes } => {
                    let started_here = *seen == 0;
                    let start = offset;
                    let taken = (PREFIX_LEN - *seen).min(chunk.len() - offset);
                    bytes[*seen..*seen + taken].copy_from_slice(&chunk[offset..offset + taken]);
                    *seen += taken;
                    offset += taken;
                    if *seen < PREFIX_LEN {
                        continue;
                    }
                    let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
                    // A u32 always fits in usize on the 32- and 64-bit targets tokio runs on.
                    let length = usize::try_from(length).unwrap_or(usize::MAX);
                    if length > self.limit {
                        let at = if started_here { start } else { 0 };
                        self.state = State::Stopped;
                        return Some(Oversized { at, length });
                    }
                    self.state = State::Message { remaining: length };
                    if length == 0 {
                        self.state = State::Prefix {
                            seen: 0,
                            bytes: [0; PREFIX_LEN],
                        };
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(length: usize) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&u32::try_from(length).unwrap().to_be_bytes());
        bytes.extend(std::iter::repeat_n(7, length));
        bytes
    }

    #[test]
    fn messages_within_the_limit_pass_in_any_chunking() {
        let body: Vec<u8> = [message(3), message(0), message(10), message(1)].concat();
        for size in 1..=body.len() {
            let mut scanner = MessageScanner::new(10);
            for chunk in body.chunks(size) {
                assert_eq!(scanner.scan(chunk), None, "chunks of {size}");
            }
        }
    }

    #[test]
    fn chunks_of_one_whole_message_each_are_checked_too() {
        let mut scanner = MessageScanner::new(10);
        assert_eq!(scanner.scan(&message(10)), None);
        assert_eq!(scanner.scan(&message(0)), None);
        let split = message(4);
        assert_eq!(scanner.scan(&split[..2]), None);
        assert_eq!(scanner.scan(&split[2..]), None);
        assert_eq!(scanner.scan(&message(3)), None, "back at a boundary");
        assert_eq!(
            scanner.scan(&message(11)),
            Some(Oversized { at: 0, length: 11 })
        );
    }

    #[test]
    fn the_first_message_over_the_limit_is_found_where_its_prefix_starts() {
        let body: Vec<u8> = [message(3), message(11), message(1)].concat();
        let mut scanner = MessageScanner::new(10);
        assert_eq!(scanner.scan(&body), Some(Oversized { at: 8, length: 11 }));
        // A prefix cut across chunks is reported in the chunk that completes it.
        for size in 1..body.len() {
            let mut scanner = MessageScanner::new(10);
            let found: Vec<_> = body.chunks(size).filter_map(|c| scanner.scan(c)).collect();
            assert_eq!(found.len(), 1, "chunks of {size}");
            assert_eq!(found[0].length, 11);
            let prefix_whole_in_one_chunk = 8 / size == 12 / size;
            if prefix_whole_in_one_chunk {
                assert_eq!(found[0].at, 8 % size, "chunks of {size}");
            } else {
                assert_eq!(found[0].at, 0, "chunks of {size}");
            }
        }
    }

    #[test]
    fn a_declared_length_is_enough_the_bytes_need_not_follow() {
        let mut scanner = MessageScanner::new(4 << 20);
        let mut prefix = vec![0];
        prefix.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            scanner.scan(&prefix),
            Some(Oversized {
                at: 0,
                length: u32::MAX as usize
            })
        );
    }
}
