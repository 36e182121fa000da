//! Available: the first selectable instance.

use http::Response;
use rpc_core::BoxError;
use tokio::time::Instant;
use tonic::body::Body as TonicBody;

use crate::call::CallContext;
use crate::classify::{FailureKind, Outcome};
use crate::loadbalance::Candidates;

/// Available: calls the first selectable instance in the directory's order (sorted by
/// instance id), without load balancing; a closing provider's refusal moves on to the
/// next one.
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    loop {
        let list = call.cluster.directory.list();
        let first = {
            let candidates = Candidates::new(&list, &call.tried, Instant::now(), None);
            candidates
                .selectable()
                .next()
                .map(|i| candidates.get(i).clone())
        };
        let Some(invoker) = first else {
            return call.give_up(None);
        };
        match call.attempt(&invoker).await {
            None => return call.give_up(None),
            Some(Outcome::Success(response) | Outcome::AppError(response)) => return Ok(response),
            Some(Outcome::Failure(failure)) if failure.kind == FailureKind::Rejected => {
                call.cluster.stats.note_reroute();
                call.last_failure = Some(failure);
            }
            Some(Outcome::Failure(failure)) => return call.give_up(Some(failure)),
        }
    }
}
