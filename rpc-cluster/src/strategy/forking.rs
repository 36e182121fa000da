//! Forking: several instances in parallel, the first success wins.

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

use crate::call::CallContext;
use crate::classify::{FailureKind, Outcome};

/// Forking: sends the request to `forks` different instances at once and returns the
/// first success (or application error); the other attempts are cancelled. If all
/// fail, the last failure is returned. For latency-critical reads; it multiplies load.
/// A request whose body cannot be replayed is sent once. Closing instances that refuse
/// are not retried here — the other forks cover the call.
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    let forks = call.cluster.config.forks.max(1);
    let mut invokers = Vec::with_capacity(forks);
    while invokers.len() < forks {
        // Only the first fork may go to an ejected or closing instance (panic mode).
        let next = if invokers.is_empty() {
            call.pick()
        } else {
            call.pick_selectable()
        };
        let Some(invoker) = next else { break };
        call.tried.push(invoker.id().clone());
        invokers.push(invoker);
    }
    if invokers.is_empty() {
        return call.give_up(None);
    }
    let mut attempts: FuturesUnordered<_> = call.parallel_attempts(&invokers).into_iter().collect();
    let mut last = None;
    while let Some(outcome) = attempts.next().await {
        match outcome {
            Outcome::Success(response) | Outcome::AppError(response) => return Ok(response),
            Outcome::Failure(failure) => {
                if failure.kind == FailureKind::Rejected {
                    call.cluster.stats.note_reroute();
                }
                last = Some(failure);
            }
        }
    }
    drop(attempts);
    call.give_up(last)
}
