//! gRPC message compression (gzip, zstd) in our own stack, configured per service and
//! per reference.
//!
//! # Why here and not in tonic
//!
//! tonic compresses only when the *generated* server or client is told to
//! (`GreeterServer::new(x).send_compressed(..)`, `GreeterClient::new(c).
//! accept_compressed(..)`). Configuration cannot reach either: a provider receives the
//! application's server as an opaque service, and the application builds its client
//! over our channel. So the compression is done where configuration does reach, on the
//! gRPC framing itself — every message travels behind a 5-byte prefix, a flag byte
//! (bit 0: compressed) and a big-endian 32-bit length, and the call's `grpc-encoding`
//! header names the compression of the messages flagged compressed (gRPC's
//! "Compression" spec and "gRPC over HTTP/2").
//!
//! - [`ProviderCompressionLayer`] sits around tonic's routes: it decompresses what
//!   clients send (any gzip or zstd request, whatever the service's configuration,
//!   as gRPC servers accept what they advertise), refuses encodings it does not read
//!   with `UNIMPLEMENTED`, and compresses the responses of services configured to.
//! - [`ConsumerCompressionLayer`] sits in a reference's stack in front of the cluster:
//!   it compresses requests as the reference is configured, once, so a retry replays
//!   the compressed bytes, and decompresses responses before the generated client's
//!   decoder sees them.
//!
//! Bodies are transformed frame by frame, one message at a time: nothing buffers more
//! than the message being transformed, streams stream. Decompression is bounded by
//! the decoding limit (`protocol.max_decoding_message_size`), so a decompression bomb
//! ends the call with `RESOURCE_EXHAUSTED` having cost at most that much memory, and a
//! message that does not decompress ends it with `INTERNAL`; nothing panics on what a
//! peer sends. A generated server or client that does compress itself
//! (`send_compressed`, `accept_compressed`) keeps working: the filters leave alone what
//! it already did.
//!
//! Files: `encoding.rs` (the encodings and the two headers), `codec.rs` (one message,
//! bounded), `framing.rs` (a body's bytes, message by message), `body.rs` (the body
//! wrapper), `provider.rs` and `consumer.rs` (the two layers), `request_encoding.rs`
//! (what a decompressed request arrived as).

mod body;
mod codec;
mod consumer;
mod encoding;
mod framing;
mod provider;
mod request_encoding;

pub use consumer::{ConsumerCompression, ConsumerCompressionLayer};
pub use encoding::Encoding;
pub use provider::{ProviderCompression, ProviderCompressionLayer};
pub use request_encoding::RequestEncoding;
pub use rpc_core::Compression;

/// gRPC's default limit on one message: 4 MiB.
const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

/// Bounds on what the compression filters hold in memory for one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressionLimits {
    /// The largest message decompressed, in bytes; one that decompresses to more ends
    /// the call with `RESOURCE_EXHAUSTED`. Default 4 MiB.
    pub max_decoding_message_size: usize,
    /// The largest message compressed, in bytes; a larger one is sent uncompressed
    /// (which gRPC allows for any message of a compressed call). Default 4 MiB.
    pub max_encoding_message_size: usize,
}

impl Default for CompressionLimits {
    fn default() -> Self {
        Self {
            max_decoding_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_encoding_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }
}

#[cfg(test)]
mod tests;
