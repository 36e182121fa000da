//! Watching a call until it ends: when its response body ends (a stream after its last
//! message), with the gRPC status it ended with.
//!
//! A gRPC call does not end when its response headers arrive: the status of a call that
//! sends messages comes in the trailers, after the last one. [`CallEndFuture`] and
//! [`CallEndBody`] (lossless-rpc-core's `GuardedBody`, holding a [`CallEnd`]) carry an
//! [`OnCallEnd`] value from the request to that point and hand it the status code
//! exactly once:
//!
//! - a trailers-only response (every error, and the provider's "closing" refusal) has its
//!   status in the headers: the call ends with the future;
//! - an error instead of a response ends the call with the error's status;
//! - otherwise the body's trailers carry the status; a body that ends without one ends
//!   the call as `UNKNOWN`, a body dropped before its end (the caller went away, or the
//!   peer reset the stream) as `CANCELLED` — or as `DEADLINE_EXCEEDED` once the served
//!   call's deadline has passed (the provider's transport cuts the call there), whether
//!   the future or the body was dropped.
//!
//! The metrics and trace filters both use it, each with its own [`OnCallEnd`]; neither
//! allocates for it.

mod body;
mod future;
mod status_code;

pub use body::{CallEnd, CallEndBody, watch};
pub use future::CallEndFuture;
pub use status_code::{StatusOfError, code_in_headers, code_in_response};

/// The status of a call whose response (future or body) is dropped before its end, the
/// served call's `deadline` given: `DEADLINE_EXCEEDED` once it has passed (the
/// transport drops a call at its caller's deadline), else `CANCELLED` (the caller went
/// away).
fn code_when_dropped(deadline: Option<tokio::time::Instant>) -> tonic::Code {
    if deadline.is_some_and(|at| tokio::time::Instant::now() >= at) {
        tonic::Code::DeadlineExceeded
    } else {
        tonic::Code::Cancelled
    }
}

/// What happens when a call ends: called once, with the call's gRPC status code.
pub trait OnCallEnd: Send + 'static {
    /// The call ended with `code`.
    fn call_ended(self, code: tonic::Code);

    /// Runs `poll` (one poll of the response body) in this observer's context; a trace
    /// enters its span, so what a streaming handler logs while producing its messages
    /// belongs to the call.
    fn in_scope<R>(&self, poll: impl FnOnce() -> R) -> R {
        poll()
    }
}
