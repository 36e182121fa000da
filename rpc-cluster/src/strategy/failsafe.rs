//! Failsafe: swallow failures.

use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

use super::empty_response;
use crate::call::CallContext;
use crate::classify::Outcome;

/// Failsafe: one attempt; a failure (of the call, not an application error status) is
/// logged and the caller gets an empty response with status OK — for calls whose
/// result does not matter, such as audit logging.
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    match call.send().await {
        Some(Outcome::Success(response) | Outcome::AppError(response)) => Ok(response),
        Some(Outcome::Failure(failure)) => {
            tracing::warn!(service = %call.cluster.directory.service(), kind = ?failure.kind, "failsafe: call failed; returning an empty response");
            call.cluster.stats.note_swallowed();
            Ok(empty_response())
        }
        None => {
            tracing::warn!(service = %call.cluster.directory.service(), "failsafe: no provider; returning an empty response");
            call.cluster.stats.note_swallowed();
            Ok(empty_response())
        }
    }
}
