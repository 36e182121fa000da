//! Failfast: one attempt.

use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

use crate::call::CallContext;
use crate::classify::Outcome;

/// Failfast: one attempt and its error goes to the caller (a closing provider's
/// refusal is still re-routed, since that request never ran).
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    match call.send().await {
        Some(Outcome::Success(response) | Outcome::AppError(response)) => Ok(response),
        Some(Outcome::Failure(failure)) => call.give_up(Some(failure)),
        None => call.give_up(None),
    }
}
