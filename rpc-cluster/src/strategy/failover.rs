//! Failover: try another instance, but only when that cannot run the request twice.

use std::time::Duration;

use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

use crate::call::CallContext;
use crate::classify::Outcome;

/// Failover (the default). Each attempt goes to an instance not yet tried in this call,
/// at most `1 + retries` attempts. A failed attempt is retried when the request
/// certainly did not run (connection refused, stream refused, body never sent) — and,
/// for methods configured idempotent, also after a timeout or UNAVAILABLE. Retries draw
/// on a budget (at most 20 % of requests plus 10 per second, over 10 s; see
/// `retry_budget`), so a failing dependency cannot multiply its load, and wait a
/// full-jitter exponential backoff between `backoff_base` and `backoff_max`.
///
/// Unlike failover in some frameworks we studied, a timeout of a non-idempotent method
/// is never retried: such a request runs at most once.
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    // Only failover retries, so only its calls earn retry budget.
    call.cluster.budget.deposit();
    let mut retries_left = call.retries;
    let mut attempt = 0u32;
    loop {
        let Some(outcome) = call.send().await else {
            return call.give_up(None);
        };
        let failure = match outcome {
            Outcome::Success(response) | Outcome::AppError(response) => return Ok(response),
            Outcome::Failure(failure) => failure,
        };
        let safe = !failure.kind.maybe_executed() || call.idempotent;
        if retries_left == 0 || !safe || !call.body.replayable() {
            return call.give_up(Some(failure));
        }
        if !call.cluster.budget.withdraw() {
            call.cluster.stats.note_budget_exhausted();
            tracing::debug!(service = %call.cluster.directory.service(), "retry budget exhausted");
            return call.give_up(Some(failure));
        }
        retries_left -= 1;
        attempt += 1;
        call.cluster.stats.note_retry();
        call.last_failure = Some(failure);
        tokio::time::sleep(backoff(&call, attempt)).await;
    }
}

/// Full jitter: uniform in `[0, min(max, base × 2^(attempt-1))]` (AWS Architecture Blog,
/// "Exponential Backoff And Jitter", 2015).
fn backoff(call: &CallContext, attempt: u32) -> Duration {
    let config = &call.cluster.config;
    let ceiling = config
        .backoff_base
        .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(config.backoff_max);
    ceiling.mul_f64(fastrand::f64())
}
