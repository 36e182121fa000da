//! Server streams that continue across instances: a stream its provider ended as
//! "moved" (`rpc-stream-moved`, status `UNAVAILABLE`, sent when the instance began to go
//! offline: `lossless_rpc_core::DrainNotice`) is re-opened on another instance, and the
//! caller's stream goes on — for a method the application declares resumable.
//!
//! How it works (`layer.rs`, `body.rs`): the request of a resumable method is read whole
//! when the call starts (a server-streaming request is one message, ready at once; a
//! body that is not ready at once is a client or bidirectional stream, and is sent as
//! it is, not resumable). The response's messages are passed on to the caller as they
//! come, and counted, and the last one kept (`messages.rs`). When the trailers carry the
//! moved mark, the method's [`ResumeRule`] derives the request that continues the stream
//! from the original request, the last message and the trailers, and it is sent — with
//! the trailers' application keys as its metadata — through the same reference, avoiding
//! the instance that moved it when another is listed (a hot upgrade's instance is the
//! same address, reached on a new connection after its GOAWAY). The new stream's messages
//! follow the old one's in the caller's body; its response headers are not seen again.
//!
//! Bounds: a move after which no message came is an empty move; consecutive empty moves
//! wait a backoff (25 ms, doubling, at most 1 s) and after [`MAX_EMPTY_MOVES`] the caller
//! gets the moved status. The caller's deadline (`grpc-timeout`) bounds the whole
//! stream: each re-open is sent with what is left of it.
//!
//! What can and cannot move (documented in docs/lifecycle.md, "Streams through a
//! deploy"): a server stream can, with no duplicate and no gap beyond what the rule
//! allows. A client stream or a bidirectional stream cannot be re-opened once its
//! request messages were consumed by the provider — they are not kept; such a stream
//! that had not started when the provider refused it is re-sent elsewhere as today (a
//! "not executed" refusal, `replay.rs`). A method not declared resumable behaves
//! exactly as before.

mod body;
mod layer;
mod messages;
mod request_head;
mod rules;
#[cfg(test)]
mod tests;

use std::marker::PhantomData;

use bytes::Bytes;
use http::{Request, Response};
use rpc_core::BoxError;
use rpc_core::InstanceId;
use tonic::body::Body as TonicBody;
use tonic::metadata::MetadataMap;
use tower_service::Service;

pub use layer::{StreamResume, StreamResumeLayer};
pub use rules::{ResumableMethods, ResumeCounts};

/// Consecutive moves with no message in between after which the caller gets the moved
/// status instead of another re-open: an instance keeps moving the stream at once.
pub const MAX_EMPTY_MOVES: u32 = 8;

/// What a [`ResumeRule`] gets to derive the request that continues a moved stream.
#[derive(Debug)]
pub struct MovedStream<'a> {
    /// The original request message, encoded (without gRPC's 5-byte prefix).
    pub request: &'a Bytes,
    /// The last message the caller received, encoded; `None` before the first one, or
    /// when it was compressed by the generated client's own `accept_compressed`.
    pub last_message: Option<&'a Bytes>,
    /// Messages the caller received so far, over every instance the stream went through.
    pub delivered: u64,
    /// The trailers of the moved stream: what its handler gave
    /// [`lossless_rpc_core::moved`](rpc_core::moved).
    pub trailers: &'a MetadataMap,
}

/// How a resumable method's moved stream continues: the request message (encoded) to
/// send to the next instance, or `None` to end the caller's stream with the moved status.
pub trait ResumeRule: Send + Sync + 'static {
    /// The request that continues `moved`.
    fn resume(&self, moved: &MovedStream<'_>) -> Option<Bytes>;
}

/// The rule of a method declared resumable in configuration (`methods.<M>.resumable:
/// true`): the original request again; the provider resumes from the trailers of the
/// moved stream, which the re-opened request carries as its metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct SameRequest;

impl ResumeRule for SameRequest {
    fn resume(&self, moved: &MovedStream<'_>) -> Option<Bytes> {
        Some(moved.request.clone())
    }
}

/// A rule over the generated message types: `rule(request, last, trailers)` gives the
/// request that continues the stream (e.g. the original one with `start = last.seq + 1`),
/// or `None` to end it with the moved status. A message that does not decode as its type
/// ends it too (logged).
pub fn typed<Req, Resp, F>(rule: F) -> TypedRule<Req, Resp, F>
where
    Req: prost::Message + Default + 'static,
    Resp: prost::Message + Default + 'static,
    F: Fn(&Req, Option<&Resp>, &MetadataMap) -> Option<Req> + Send + Sync + 'static,
{
    TypedRule {
        rule,
        types: PhantomData,
    }
}

/// The [`ResumeRule`] [`typed`] makes.
pub struct TypedRule<Req, Resp, F> {
    rule: F,
    types: PhantomData<fn(&Req, &Resp)>,
}

impl<Req, Resp, F> ResumeRule for TypedRule<Req, Resp, F>
where
    Req: prost::Message + Default + 'static,
    Resp: prost::Message + Default + 'static,
    F: Fn(&Req, Option<&Resp>, &MetadataMap) -> Option<Req> + Send + Sync + 'static,
{
    fn resume(&self, moved: &MovedStream<'_>) -> Option<Bytes> {
        let request = Req::decode(moved.request.clone())
            .inspect_err(|error| tracing::warn!(%error, "a moved stream's request does not decode: not resumed"))
            .ok()?;
        let last = match moved.last_message {
            Some(message) => Some(
                Resp::decode(message.clone())
                    .inspect_err(|error| tracing::warn!(%error, "a moved stream's last message does not decode: not resumed"))
                    .ok()?,
            ),
            None => None,
        };
        let next = (self.rule)(&request, last.as_ref(), moved.trailers)?;
        Some(Bytes::from(next.encode_to_vec()))
    }
}

/// The channel a [`StreamResume`] wraps: a reference's service under it (compression over
/// the cluster), cloned for each re-open.
pub trait ResumeInner:
    Service<
        Request<TonicBody>,
        Response = Response<TonicBody>,
        Error = BoxError,
        Future: Send + 'static,
    > + Clone
    + Send
    + Unpin
    + 'static
{
}

impl<S> ResumeInner for S where
    S: Service<
            Request<TonicBody>,
            Response = Response<TonicBody>,
            Error = BoxError,
            Future: Send + 'static,
        > + Clone
        + Send
        + Unpin
        + 'static
{
}

/// A request extension of a resumable call for the cluster below: report the instance
/// that serves it ([`ServedBy`]), and avoid `avoid` when another instance is listed.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResumeAttempt {
    pub(crate) avoid: Option<InstanceId>,
}

/// A response extension of a call that carried a [`ResumeAttempt`]: the instance that
/// answered it.
#[derive(Clone, Debug)]
pub(crate) struct ServedBy(pub(crate) InstanceId);
