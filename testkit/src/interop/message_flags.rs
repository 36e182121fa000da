//! Which gRPC messages of a body were compressed, read from the framing as the body
//! passes.
//!
//! gRPC frames every message as a 1-byte flag (bit 0: compressed), a 4-byte big-endian
//! length and the message (gRPC over HTTP/2, "Length-Prefixed-Message"). tonic decodes
//! and decompresses before a handler or a caller sees a message, so whether one *was*
//! compressed — what the `CompressedRequest` and `CompressedResponse` interop features
//! check — is visible only on the wire. [`FlagsBody`] reads it there without changing a
//! byte. On a provider, rpc's compression filter decompresses a request before the
//! generated server (and this body) sees it, and records what arrived itself
//! ([`RequestEncoding`]); [`RequestFlags`] reads whichever record a request has.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use pin_project_lite::pin_project;
use rpc::filter::compression::RequestEncoding;

/// The compressed flags of the messages seen so far, in order. Cheap to clone; clones
/// share the record.
#[derive(Clone, Debug, Default)]
pub struct MessageFlags(Arc<Mutex<VecDeque<bool>>>);

impl MessageFlags {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the flag of the oldest message not taken yet: `Some(true)` when it was
    /// compressed, `None` when no further message was seen.
    pub fn next(&self) -> Option<bool> {
        self.0.lock().pop_front()
    }

    /// The flags of every message not taken yet, oldest first.
    pub fn pending(&self) -> Vec<bool> {
        self.0.lock().iter().copied().collect()
    }

    /// Forgets every flag (before a new call, when one record serves several calls).
    pub fn clear(&self) {
        self.0.lock().clear();
    }

    fn push(&self, compressed: bool) {
        self.0.lock().push_back(compressed);
    }
}

/// Where a handler learns whether each request message arrived compressed.
#[derive(Clone, Debug)]
pub enum RequestFlags {
    /// The provider's compression filter decompressed the request, and recorded each
    /// message's flag as it arrived.
    Decompressed(RequestEncoding),
    /// The flags as read off the body the generated server got.
    Read(MessageFlags),
}

impl RequestFlags {
    /// The record `extensions` (a request's) carry, if any.
    pub fn of(extensions: &http::Extensions) -> Option<Self> {
        if let Some(arrived) = extensions.get::<RequestEncoding>() {
            return Some(Self::Decompressed(arrived.clone()));
        }
        extensions.get::<MessageFlags>().cloned().map(Self::Read)
    }

    /// Takes the flag of the oldest request message not taken yet.
    pub fn next(&self) -> Option<bool> {
        match self {
            Self::Decompressed(arrived) => arrived.next_message_compressed(),
            Self::Read(flags) => flags.next(),
        }
    }
}

/// Where the reader is in the framing.
#[derive(Debug, Default)]
struct Framing {
    /// Bytes of the current 5-byte prefix read so far.
    prefix: [u8; 5],
    prefix_len: usize,
    /// Bytes of the current message still to skip.
    message_left: usize,
}

impl Framing {
    /// Reads one chunk, recording a flag for every prefix it completes.
    fn read(&mut self, mut chunk: &[u8], flags: &MessageFlags) {
        while !chunk.is_empty() {
            if self.message_left > 0 {
                let skip = self.message_left.min(chunk.len());
                self.message_left -= skip;
                chunk.advance(skip);
                continue;
            }
            let take = (self.prefix.len() - self.prefix_len).min(chunk.len());
            self.prefix[self.prefix_len..self.prefix_len + take].copy_from_slice(&chunk[..take]);
            self.prefix_len += take;
            chunk.advance(take);
            if self.prefix_len == self.prefix.len() {
                flags.push(self.prefix[0] & 1 == 1);
                let [_, a, b, c, d] = self.prefix;
                self.message_left = u32::from_be_bytes([a, b, c, d]) as usize;
                self.prefix_len = 0;
            }
        }
    }
}

pin_project! {
    /// A body that records the compressed flag of every gRPC message passing through it
    /// into a [`MessageFlags`], and is otherwise `inner` unchanged.
    pub struct FlagsBody<B> {
        #[pin]
        inner: B,
        framing: Framing,
        flags: MessageFlags,
    }
}

impl<B> FlagsBody<B> {
    /// `inner`, recording into `flags`.
    pub fn new(inner: B, flags: MessageFlags) -> Self {
        Self {
            inner,
            framing: Framing::default(),
            flags,
        }
    }
}

impl<B: Body<Data = Bytes>> Body for FlagsBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let poll = this.inner.poll_frame(cx);
        let data = match &poll {
            Poll::Ready(Some(Ok(frame))) => frame.data_ref(),
            _ => None,
        };
        if let Some(data) = data {
            this.framing.read(data, this.flags);
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(compressed: bool, len: usize) -> Vec<u8> {
        let mut bytes = vec![u8::from(compressed)];
        bytes.extend_from_slice(&(len as u32).to_be_bytes());
        bytes.extend(std::iter::repeat_n(7u8, len));
        bytes
    }

    #[test]
    fn flags_are_read_across_any_chunking() {
        let mut wire = message(true, 3);
        wire.extend(message(false, 0));
        wire.extend(message(true, 300));
        for chunk_size in [1, 2, 4, 5, 6, 64, wire.len()] {
            let flags = MessageFlags::new();
            let mut framing = Framing::default();
            for chunk in wire.chunks(chunk_size) {
                framing.read(chunk, &flags);
            }
            assert_eq!(
                flags.pending(),
                [true, false, true],
                "chunks of {chunk_size}"
            );
            assert_eq!(flags.next(), Some(true));
            assert_eq!(flags.pending(), [false, true]);
        }
    }
}
