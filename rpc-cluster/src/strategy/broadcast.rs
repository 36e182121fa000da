//! Broadcast: every instance.

use futures_util::future::join_all;
use http::Response;
use rpc_core::BoxError;
use tokio::time::Instant;
use tonic::body::Body as TonicBody;

use crate::call::CallContext;
use crate::classify::{FailureKind, Outcome};
use crate::loadbalance::Candidates;

/// Broadcast: sends the request to every selectable instance at once (e.g. to refresh
/// caches). Any failure or application error fails the call (the first one is
/// returned); otherwise the last success is. An instance that refuses because it is
/// closing is skipped: it is leaving, and every other instance got the request.
/// A request whose body cannot be replayed goes to one instance only.
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    let list = call.cluster.directory.list();
    let invokers: Vec<_> = {
        let candidates = Candidates::new(&list, &[], Instant::now(), None);
        candidates
            .selectable()
            .map(|i| candidates.get(i).clone())
            .collect()
    };
    if invokers.is_empty() {
        return call.give_up(None);
    }
    let attempts = call.parallel_attempts(&invokers);
    let mut last_success = None;
    let mut first_error = None;
    for outcome in join_all(attempts).await {
        match outcome {
            Outcome::Success(response) => last_success = Some(response),
            Outcome::AppError(response) => {
                first_error.get_or_insert(Ok(response));
            }
            Outcome::Failure(failure) if failure.kind == FailureKind::Rejected => {
                call.cluster.stats.note_reroute();
            }
            Outcome::Failure(failure) => {
                first_error.get_or_insert_with(|| failure.into_result());
            }
        }
    }
    match (first_error, last_success) {
        (Some(error), _) => error,
        (None, Some(response)) => Ok(response),
        (None, None) => call.give_up(None),
    }
}
