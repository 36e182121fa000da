//! The messages of a response stream as they pass: how many, and the last one.

use bytes::Bytes;

/// gRPC's length prefix: one flag byte (compressed or not), four bytes of length.
const PREFIX: usize = 5;

/// Counts the complete messages of a gRPC response body fed to it in data frames of
/// any cut, and keeps the last one (without its prefix) when it is not compressed.
///
/// No byte is copied as messages pass: a message's body is kept as the slices of the
/// frames it came in (sharing their buffers), and joined into one only when a moved
/// stream asks for it. Copying every frame into a buffer of its own, as this did first,
/// cost a resumable stream 243–264 instructions per 100-byte message (now 79–129) and
/// a copy of all it carried (`bash benches/instructions.sh streaming`).
#[derive(Debug, Default)]
pub(crate) struct MessageTracker {
    /// The prefix of the message being read, as far as it came (`prefix_len` bytes).
    prefix: [u8; PREFIX],
    prefix_len: usize,
    /// Body bytes of the message being read still to come, once its prefix is whole.
    remaining: usize,
    /// Whether the message being read is compressed.
    compressed: bool,
    /// The body of the message being read, as far as it came.
    current: Vec<Bytes>,
    /// The body of the last complete message, when it was not compressed.
    last: Vec<Bytes>,
    has_last: bool,
    delivered: u64,
}

impl MessageTracker {
    /// Takes in one data frame of the body.
    pub(crate) fn feed(&mut self, data: &Bytes) {
        let mut at = 0;
        while at < data.len() {
            if self.prefix_len < PREFIX {
                let taken = (PREFIX - self.prefix_len).min(data.len() - at);
                self.prefix[self.prefix_len..self.prefix_len + taken]
                    .copy_from_slice(&data[at..at + taken]);
                self.prefix_len += taken;
                at += taken;
                if self.prefix_len < PREFIX {
                    return;
                }
                self.compressed = self.prefix[0] != 0;
                let length = u32::from_be_bytes([
                    self.prefix[1],
                    self.prefix[2],
                    self.prefix[3],
                    self.prefix[4],
                ]);
                self.remaining = length as usize;
            }
            let taken = self.remaining.min(data.len() - at);
            if taken > 0 && !self.compressed {
                self.current.push(data.slice(at..at + taken));
            }
            self.remaining -= taken;
            at += taken;
            if self.remaining == 0 {
                self.message_ended();
            }
        }
    }

    /// The message being read is whole: it becomes the last one.
    fn message_ended(&mut self) {
        std::mem::swap(&mut self.last, &mut self.current);
        self.current.clear();
        self.has_last = !self.compressed;
        self.prefix_len = 0;
        self.delivered += 1;
    }

    /// Complete messages so far.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The last complete message, if it was not compressed (joined into one buffer
    /// here, if it came in pieces).
    pub(crate) fn last(&mut self) -> Option<&Bytes> {
        if !self.has_last {
            return None;
        }
        match self.last.len() {
            0 => self.last.push(Bytes::new()),
            1 => {}
            _ => {
                let joined: Vec<u8> = self.last.concat();
                self.last = vec![Bytes::from(joined)];
            }
        }
        self.last.first()
    }

    /// Whether a message was cut off (the stream ended in the middle of one).
    pub(crate) fn in_message(&self) -> bool {
        self.prefix_len > 0
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
    fn a_message_in_many_frames_is_kept_whole_and_a_compressed_one_after_it_is_not() {
        let body: Vec<u8> = (0..200u8).collect();
        let bytes = framed(&body);
        let mut tracker = MessageTracker::default();
        for chunk in bytes.chunks(7) {
            tracker.feed(&Bytes::copy_from_slice(chunk));
        }
        assert_eq!(tracker.delivered(), 1);
        assert_eq!(tracker.last().unwrap().as_ref(), &body[..]);
        // Asked again: the joined message, not joined twice.
        assert_eq!(tracker.last().unwrap().as_ref(), &body[..]);
        let mut compressed = framed(b"zz");
        compressed[0] = 1;
        tracker.feed(&Bytes::from(compressed));
        assert_eq!(tracker.delivered(), 2);
        assert!(tracker.last().is_none());
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
