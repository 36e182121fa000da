//! What a compressed request arrived as, for the layers and handlers behind the
//! provider's compression filter (which decompresses its messages and removes
//! `grpc-encoding`, so that the generated server accepts them).

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use super::encoding::Encoding;

/// A request extension on every request the provider's compression filter
/// decompresses: the encoding it arrived in and, message by message as the body is
/// read, whether each arrived compressed (gRPC lets a sender leave some messages of a
/// compressed call uncompressed). Handlers read it with
/// `request.extensions().get::<RequestEncoding>()`; without it the request was not
/// compressed. At most [`RequestEncoding::UNTAKEN`] flags wait to be taken (a long
/// stream whose handler never looks costs no more); a message read while that many
/// wait is not recorded. Cheap to clone; clones share the record.
#[derive(Clone, Debug)]
pub struct RequestEncoding {
    encoding: Encoding,
    flags: Arc<Mutex<VecDeque<bool>>>,
}

impl RequestEncoding {
    /// The most flags kept waiting to be taken.
    pub const UNTAKEN: usize = 1024;

    pub(crate) fn new(encoding: Encoding) -> Self {
        Self {
            encoding,
            flags: Arc::default(),
        }
    }

    /// The request's `grpc-encoding`.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Takes the flag of the oldest message read and not taken yet: `Some(true)` when it
    /// arrived compressed, `None` when no further message has been read.
    pub fn next_message_compressed(&self) -> Option<bool> {
        self.flags.lock().pop_front()
    }

    pub(crate) fn record(&self, compressed: bool) {
        let mut flags = self.flags.lock();
        if flags.len() < Self::UNTAKEN {
            flags.push_back(compressed);
        }
    }
}
