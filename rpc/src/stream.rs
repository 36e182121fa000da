//! Streams that survive a deploy: the provider's handler is told that its instance goes
//! offline, ends its stream as "moved" with what the next instance resumes from, and
//! the consumer re-opens it elsewhere — so the caller's stream goes on.
//!
//! Provider side, in a server-streaming handler:
//!
//! ```no_run
//! # use lossless_rpc::tonic::{self, Request, Status, metadata::MetadataMap};
//! # async fn send(_n: u64) {}
//! async fn handler(request: Request<()>) -> Result<(), Status> {
//!     let notice = lossless_rpc::stream::DrainNotice::of(&request);
//!     for seq in 0..300u64 {
//!         if notice.is_draining() {
//!             // Ends at a message boundary: the next instance resumes after `seq - 1`.
//!             let mut resume = MetadataMap::new();
//!             resume.insert("resume-from", seq.to_string().parse().unwrap());
//!             return Err(lossless_rpc::stream::moved(resume));
//!         }
//!         send(seq).await;
//!     }
//!     Ok(())
//! }
//! ```
//!
//! Consumer side: declare the method resumable — in configuration
//! (`consumer.references.<service>.methods.<Method>.resumable: true`: the same request
//! again, with the moved stream's trailers as its metadata, so the provider reads
//! `resume-from` from the request) or in code, with a rule over the generated types
//! ([`ApplicationBuilder::resume_rule`](crate::ApplicationBuilder::resume_rule),
//! [`typed`]). Nothing else changes for the caller.
//!
//! What moves: server streams. A client or bidirectional stream is not re-opened once
//! the provider has consumed its messages; one the provider refused before it started
//! (a closing provider's "not executed") is re-sent elsewhere, as a unary call is. A
//! handler that ignores the notice is cut at the drain bound, as before, and the stop
//! is reported as forced with `streams_cut`. A plain gRPC client (any language) sees
//! `UNAVAILABLE` with the `rpc-stream-moved: 1` trailer and the handler's trailers, and
//! can follow the same rule.

pub use rpc_cluster::resume::{
    MAX_EMPTY_MOVES, MovedStream, ResumableMethods, ResumeCounts, ResumeRule, SameRequest,
    TypedRule, typed,
};
pub use rpc_core::metadata::STREAM_MOVED;
pub use rpc_core::{DrainNotice, MOVED_MESSAGE, moved};
