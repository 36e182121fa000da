//! The error of a request that certainly did not reach its instance.

use rpc_core::BoxError;

/// A request that never left this process: no connection could be made, or the
/// connection could take no new stream (it had closed, or the instance sent a GOAWAY).
///
/// Its source says why (an `io::Error` of the dial, an `h2::Error` of the connection).
/// The consumer's cluster layer treats it as "not executed": it is re-sent, also for a
/// non-idempotent method.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct NotSent {
    what: String,
    #[source]
    source: BoxError,
}

impl NotSent {
    pub(super) fn new(what: String, source: impl Into<BoxError>) -> Self {
        Self {
            what,
            source: source.into(),
        }
    }
}
