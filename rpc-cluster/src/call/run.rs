//! Drives a call under its strategy, to the response its caller gets.
//!
//! The strategy says where the attempts go and, after a failure, whether to try again;
//! this file carries that out: one attempt at a time (asking the strategy after each
//! failure, checking the retry budget, waiting the backoff), a race of several at once,
//! or one on every instance; and, for a swallowed failure, the empty answer and the
//! hand-off to the failback queue.

use futures_util::StreamExt;
use futures_util::future::{BoxFuture, join_all};
use futures_util::stream::FuturesUnordered;
use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

use super::Call;
use super::pick::Route;
use crate::classify::{Failure, FailureKind, Outcome};
use crate::failback_queue::{Retried, RetryJob};
use crate::strategy::{Decision, Failed, Plan};

/// What a call gives its caller.
type Answer = Result<Response<TonicBody>, BoxError>;

/// Runs `call` under its strategy's plan. Each plan's future is boxed on its own, so a
/// call allocates the size of its plan, not of the largest one.
pub(crate) fn run(call: Call) -> BoxFuture<'static, Answer> {
    match call.plan() {
        Plan::Balanced => Box::pin(one_at_a_time(call, Route::Balanced)),
        Plan::InOrder => Box::pin(one_at_a_time(call, Route::InOrder)),
        Plan::Race(forks) => Box::pin(race(call, forks)),
        Plan::All => Box::pin(all(call)),
    }
}

/// Attempts one after another, each routed by `route`, for as long as the strategy
/// asks for another and the retry budget allows it.
async fn one_at_a_time(mut call: Call, route: Route) -> Answer {
    call.earn_retries();
    loop {
        let failure = match call.send(route).await {
            Some(Outcome::Success(response) | Outcome::AppError(response)) => return Ok(response),
            Some(Outcome::Failure(failure)) => Some(failure),
            None => None,
        };
        let failed = failure
            .as_ref()
            .map_or(Failed::NoAttempt, |failure| Failed::Attempt(failure.kind));
        match (call.decide(failed), failure) {
            (Decision::Retry { backoff }, Some(failure)) => {
                if !call.spend_retry(failure) {
                    return call.give_up(None);
                }
                tokio::time::sleep(backoff).await;
            }
            (Decision::Swallow { retry_later }, failure) => {
                return Ok(swallow(call, failure, retry_later, route));
            }
            // A retry asked for when no attempt could be made has nothing to send again.
            (Decision::Retry { .. } | Decision::Fail, failure) => return call.give_up(failure),
        }
    }
}

/// Attempts on up to `forks` instances at once; the first answer wins and the others
/// are cancelled. A closing provider's refusal is counted as re-routed: the other
/// forks cover the call.
async fn race(mut call: Call, forks: usize) -> Answer {
    let invokers = call.pick_forks(forks);
    if invokers.is_empty() {
        return call.give_up(None);
    }
    let mut attempts: FuturesUnordered<_> = call.send_each(&invokers).into_iter().collect();
    let mut last = None;
    while let Some(outcome) = attempts.next().await {
        match outcome {
            Outcome::Success(response) | Outcome::AppError(response) => return Ok(response),
            Outcome::Failure(failure) => {
                if failure.kind == FailureKind::Rejected {
                    call.stack.stats.note_reroute();
                }
                last = Some(failure);
            }
        }
    }
    drop(attempts);
    call.give_up(last)
}

/// Attempts on every selectable instance at once. Any failure or application error
/// fails the call (the first one is returned), else the last success answers it. A
/// closing provider's refusal is skipped: it is leaving, and every other instance got
/// the request.
async fn all(mut call: Call) -> Answer {
    let invokers = call.pick_all();
    if invokers.is_empty() {
        return call.give_up(None);
    }
    let attempts = call.send_each(&invokers);
    let mut last_success = None;
    let mut first_error = None;
    for outcome in join_all(attempts).await {
        match outcome {
            Outcome::Success(response) => last_success = Some(response),
            Outcome::AppError(response) => {
                first_error.get_or_insert(Ok(response));
            }
            Outcome::Failure(failure) if failure.kind == FailureKind::Rejected => {
                call.stack.stats.note_reroute();
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

/// Answers a failed call with an empty OK response; with `retry_later`, queues it for
/// background retries (routed by `route`) if its body can be sent again.
fn swallow(
    call: Call,
    failure: Option<Failure>,
    retry_later: bool,
    route: Route,
) -> Response<TonicBody> {
    let stack = call.stack.clone();
    let then = if retry_later {
        "will retry in the background"
    } else {
        "answering with an empty response"
    };
    match failure {
        Some(failure) => {
            tracing::warn!(service = %stack.directory.service(), cluster = ?stack.config.cluster, kind = ?failure.kind, "call failed; {then}");
        }
        None => {
            tracing::warn!(service = %stack.directory.service(), cluster = ?stack.config.cluster, "no provider; {then}");
        }
    }
    stack.stats.note_swallowed();
    if retry_later && call.body.replayable() {
        stack.failback.enqueue(FailbackRetry { call, route });
    }
    empty_response()
}

/// A failed call waiting in the failback queue.
struct FailbackRetry {
    call: Call,
    route: Route,
}

impl RetryJob for FailbackRetry {
    fn retry(&mut self) -> BoxFuture<'_, Retried> {
        Box::pin(async move {
            self.call.forget_tried();
            match self.call.send(self.route).await {
                Some(Outcome::Success(_) | Outcome::AppError(_)) => Retried::Done,
                _ if !self.call.body.replayable() => Retried::Spent,
                _ => Retried::Failed,
            }
        })
    }
}

/// A successful gRPC response carrying one empty message (every field at its default)
/// and status OK: what failsafe and failback give the caller instead of an error.
fn empty_response() -> Response<TonicBody> {
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::StreamBody;

    // One length-prefixed message frame: not compressed, length 0.
    let message = Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]));
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames = futures_util::stream::iter([
        Ok::<_, std::convert::Infallible>(message),
        Ok(Frame::trailers(trailers)),
    ]);
    let mut response = Response::new(TonicBody::new(StreamBody::new(frames)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
