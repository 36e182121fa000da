//! The messages of a response stream as they pass: how many, and the last one.

use bytes::{Buf, Bytes, BytesMut};

/// gRPC's length prefix: one flag byte (compressed or not), four bytes of length.
const PREFIX: usize = 5;

/// Counts the complete messages of a gRPC response body fed to it in data frames of
/// any cut, and keeps the last one (without its prefix) when it is not compressed.
#[derive(Debug, Default)]
pub(crate) struct MessageTracker {
    /// Bytes of a message not complete yet.
    pending: BytesMut,
    last: Option<Bytes>,
    delivered: u64,
}

impl MessageTracker {
    /// Takes in one data frame of the body.
    pub(crate) fn feed(&mut self, data: &Bytes) {
        self.pending.extend_from_slice(data);
        while self.pending.len() >= PREFIX {
            let compressed = self.pending[0] != 0;
            let length = (&self.pending[1..PREFIX]).get_u32() as usize;
            if self.pending.len() < PREFIX + length {
                return;
            }
            let mut message = self.pending.split_to(PREFIX + length);
            message.advance(PREFIX);
            self.last = (!compressed).then(|| message.freeze());
            self.delivered += 1;
        }
    }

    /// Complete messages so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The last complete message, if it was not compressed.
    pub(crate) fn last(&self) -> Option<&Bytes> {
        self.last.as_ref()
    }

    /// Whether a message was cut off (the stream ended in the middle of one).
    pub(crate) fn in_message(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut frame = vec![0];
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(message);
        frame
    }

    #[test]
    fn messages_are_counted_across_any_cut_of_the_frames() {
        let mut bytes = framed(b"one");
        bytes.extend(framed(b""));
        bytes.extend(framed(b"three"));
        for cut in 0..bytes.len() {
            let mut tracker = MessageTracker::default();
            tracker.feed(&Bytes::copy_from_slice(&bytes[..cut]));
            tracker.feed(&Bytes::copy_from_slice(&bytes[cut..]));
            assert_eq!(tracker.delivered(), 3, "cut at {cut}");
            assert_eq!(tracker.last().unwrap(), "three");
            assert!(!tracker.in_message());
        }
    }

    #[test]
    fn a_compressed_last_message_is_not_kept_and_a_partial_one_is_noticed() {
        let mut tracker = MessageTracker::default();
        let mut compressed = framed(b"zz");
        compressed[0] = 1;
        tracker.feed(&Bytes::from(compressed));
        assert_eq!(tracker.delivered(), 1);
        assert!(tracker.last().is_none());
        tracker.feed(&Bytes::from(framed(b"abc")[..4].to_vec()));
        assert!(tracker.in_message());
        assert_eq!(tracker.delivered(), 1);
    }
}
