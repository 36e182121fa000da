//! Drives a call under its strategy, to the response its caller gets: the one owner of
//! a call's control flow. The strategy decides (`strategy/`), the call carries its state
//! (`mod.rs`), and each attempt goes down the layers once and comes back
//! (`attempt.rs`).
//!
//! The strategy says where the attempts go and, after a failure, whether to try again;
//! this file carries that out: one attempt at a time (asking the strategy after each
//! failure, checking the retry budget, waiting the backoff), a race of several at once,
//! or one on every instance; and, for a swallowed failure, the empty answer and the
//! hand-off to the failback queue.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

use futures_util::StreamExt;
use futures_util::future::{BoxFuture, join_all};
use futures_util::stream::FuturesUnordered;
use http::Response;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;

use super::attempt::{self, Target};
use super::pick::Route;
use super::swallow::swallow;
use super::{Call, OVERLOAD_REROUTES, TRANSPARENT_RESENDS};
use crate::classify::{Failure, FailureKind, Outcome};
use crate::error::ClusterError;
use crate::invoker::Invoker;
use crate::resume::ServedBy;
use crate::rng;
use crate::strategy::{CallFacts, Decision, Failed, Plan};

/// What a call gives its caller.
type Answer = Result<Response<TonicBody>, BoxError>;

impl Call {
    /// Picks an instance by `route` and sends the request to it, until an attempt is not
    /// a closing provider's refusal: such a request was not executed, so it goes to
    /// another instance under every strategy, without counting as a retry. With no
    /// instance to pick, it waits for one to be listed (`wait_for_provider`). `None` when
    /// no instance is left to try or the body cannot be sent again.
    pub(super) async fn send(&mut self, route: Route) -> Option<Outcome> {
        loop {
            let invoker = match self.pick(route) {
                Some(invoker) => invoker,
                None => self.wait_for_provider(route).await?,
            };
            match self.attempt(&invoker).await? {
                Outcome::Failure(failure) if failure.kind == FailureKind::Rejected => {
                    self.stack.stats.note_reroute();
                    self.last_failure = Some(failure);
                }
                // An overloaded instance's refusal: not executed, re-routed once free.
                Outcome::Failure(failure)
                    if failure.kind == FailureKind::Overloaded
                        && self.overload_reroutes < OVERLOAD_REROUTES =>
                {
                    self.overload_reroutes += 1;
                    self.stack.stats.note_reroute();
                    self.last_failure = Some(failure);
                }
                // gRPC's transparent retry, at most TRANSPARENT_RESENDS times a call:
                // the request was certainly not processed (its connection had just
                // received a GOAWAY, or closed before the request was written). It is
                // sent again without counting as a retry, and the same instance stays
                // eligible: a new connection to the same address may reach a hot
                // upgrade's new process, the only one serving that instance. More than
                // once, because a re-send made at once can still be queued on the
                // closing connection before the channel has noticed it closed.
                Outcome::Failure(failure)
                    if failure.kind == FailureKind::NotSent
                        && self.unsent_resends < TRANSPARENT_RESENDS =>
                {
                    self.unsent_resends += 1;
                    self.tried.retain(|id| id != invoker.id());
                    self.last_failure = Some(failure);
                }
                outcome => {
                    self.attempts += 1;
                    return Some(outcome);
                }
            }
        }
    }

    /// Sends one attempt to `invoker`. `None` when the body can no longer be sent.
    async fn attempt(&mut self, invoker: &Arc<Invoker>) -> Option<Outcome> {
        let (body, end) = self.body.attempt()?;
        self.tried.push(invoker.id().clone());
        self.sent += 1;
        let (request, wait) = self.request_with(body, end);
        let target = Target {
            invoker,
            path: self.parts.uri.path(),
            number: self.sent,
        };
        let outcome = attempt::attempt(&self.stack, target, request, wait, &mut self.rng).await;
        Some(outcome)
    }

    /// One attempt per instance of `invokers`, to run at once (as many as the body can
    /// be replayed for), each with a generator forked from the call's.
    fn send_each<'a>(
        &mut self,
        invokers: &'a [Arc<Invoker>],
    ) -> Vec<impl Future<Output = Outcome> + 'a> {
        let mut attempts = Vec::with_capacity(invokers.len());
        for invoker in invokers {
            let Some((body, end)) = self.body.attempt() else {
                break;
            };
            let (request, wait) = self.request_with(body, end);
            let stack = self.stack.clone();
            let mut rng = rng::fork(&mut self.rng);
            self.sent += 1;
            let number = self.sent;
            // Forks are rare (forking, broadcast): one clone of the path each is fine.
            let uri = self.parts.uri.clone();
            attempts.push(async move {
                let target = Target {
                    invoker,
                    path: uri.path(),
                    number,
                };
                attempt::attempt(&stack, target, request, wait, &mut rng).await
            });
        }
        attempts
    }

    /// Asks the strategy what to do after `failed`.
    fn decide(&mut self, failed: Failed) -> Decision {
        let facts = CallFacts {
            attempts: self.attempts,
            retries_allowed: self.retries_allowed,
            idempotent: self.idempotent,
            replayable: self.body.replayable(),
        };
        self.stack
            .strategy
            .on_failure(failed, &facts, &mut self.rng)
    }

    /// Counts the call toward the retry budget, if its strategy retries.
    fn earn_retries(&self) {
        if let Some(budget) = &self.stack.retry_budget {
            budget.deposit();
        }
    }

    /// Takes one retry from the budget after `failure`, which is what the caller gets
    /// if no later attempt does better. False when the budget is spent: the call must
    /// give up.
    fn spend_retry(&mut self, failure: Failure) -> bool {
        let kind = failure.kind;
        self.last_failure = Some(failure);
        let budget = self.stack.retry_budget.as_ref();
        if budget.is_some_and(|budget| !budget.withdraw()) {
            self.stack.stats.note_budget_exhausted();
            tracing::debug!(service = %self.stack.directory.service(), "retry budget exhausted");
            return false;
        }
        self.stack.stats.note_retry(kind);
        true
    }

    /// `response`, told which instance served it when the call asked (a resumable
    /// stream's: `resume`).
    fn answered(&self, mut response: Response<TonicBody>) -> Response<TonicBody> {
        if self.reports_instance
            && let Some(id) = self.tried.last()
        {
            response.extensions_mut().insert(ServedBy(id.clone()));
        }
        response
    }

    /// The result when `send` made no attempt: after an attempt that failed, a body that
    /// cannot be sent again (a stream sent in part) gives the caller that failure — a
    /// closing provider's refusal, say — rather than "no provider" while others serve;
    /// otherwise no instance was left.
    fn no_attempt_left(self) -> Answer {
        if self.last_failure.is_some() && !self.body.replayable() {
            return self.give_up(None);
        }
        self.no_provider()
    }

    /// The result when no attempt could be made (no instance left, after the wait for
    /// one): "no provider", as documented, even after attempts that failed — the last
    /// of them is told in the message, and the status's source is still
    /// [`ClusterError::NoProvider`].
    fn no_provider(self) -> Result<Response<TonicBody>, BoxError> {
        self.stack.stats.note_no_provider();
        let error = ClusterError::NoProvider {
            service: self.stack.directory.service().clone(),
        };
        let status = match &self.last_failure {
            None => error.into_status(),
            Some(last) => error.into_status_after(&last.summary()),
        };
        Err(Box::new(status))
    }

    /// Makes every instance eligible again (a background retry starts afresh).
    pub(super) fn forget_tried(&mut self) {
        self.tried.clear();
    }

    /// The result to give the caller after the last attempt failed or none could be
    /// made: that failure, else the last one seen, else "no provider".
    fn give_up(self, failure: Option<Failure>) -> Result<Response<TonicBody>, BoxError> {
        match failure.or(self.last_failure) {
            Some(failure) => failure.into_result(),
            None => {
                self.stack.stats.note_no_provider();
                Err(Box::new(
                    ClusterError::NoProvider {
                        service: self.stack.directory.service().clone(),
                    }
                    .into_status(),
                ))
            }
        }
    }
}

/// Runs `call` under its strategy's plan. Each plan's future is boxed on its own, so a
/// call allocates the size of its plan, not of the largest one. The call's state (over a
/// kilobyte) is boxed too: held inline, the plan's future would be copied whole into its
/// box, and the state again into the future's body at the first poll.
pub(crate) fn run(call: Call) -> BoxFuture<'static, Answer> {
    let call = Box::new(call);
    match call.plan() {
        Plan::Balanced => Box::pin(one_at_a_time(call, Route::Balanced)),
        Plan::InOrder => Box::pin(one_at_a_time(call, Route::InOrder)),
        Plan::Race(forks) => Box::pin(race(call, forks)),
        Plan::All => Box::pin(all(call)),
    }
}

/// Attempts one after another, each routed by `route`, for as long as the strategy
/// asks for another and the retry budget allows it.
async fn one_at_a_time(mut call: Box<Call>, route: Route) -> Answer {
    call.earn_retries();
    loop {
        let failure = match call.send(route).await {
            Some(Outcome::Success(response) | Outcome::AppError(response)) => {
                return Ok(call.answered(response));
            }
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
                return Ok(swallow(*call, failure, retry_later, route));
            }
            // A retry asked for when no attempt could be made has nothing to send again.
            (Decision::Retry { .. } | Decision::Fail, None) => return call.no_attempt_left(),
            (Decision::Fail, failure) => return call.give_up(failure),
        }
    }
}

/// Attempts on up to `forks` instances at once; the first answer wins and the others
/// are cancelled. A closing provider's refusal is counted as re-routed: the other
/// forks cover the call.
async fn race(mut call: Box<Call>, forks: usize) -> Answer {
    // A stream not read whole when the call began can go to one attempt only (each new
    // attempt fences off the ones before it): it goes to one instance, not to several
    // whose streams would all but the last be cut.
    let forks = if call.body.is_complete() { forks } else { 1 };
    let invokers = call.pick_forks(forks);
    if invokers.is_empty() {
        return call.give_up(None);
    }
    let mut outcomes = start_each(call.send_each(&invokers)).await;
    let mut last = None;
    while let Some(outcome) = outcomes.next().await {
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
    drop(outcomes);
    call.give_up(last)
}

/// Polls each of `attempts` once, in order, and then yields their outcomes as they come:
/// those that answered in that first poll, then the others as they finish.
///
/// Every fork is started before any answer is taken. A `FuturesUnordered` alone returns
/// the first outcome the moment one future gives it, before polling the rest — and an
/// attempt can answer in its very first poll: the request goes to the channel's task on
/// another thread, which on a loaded machine can send it, and hand back the reply, while
/// this thread is descheduled in mid-poll. The fork behind it was then never sent at all
/// (seen as an instance with no dispatch in about one loaded run in twenty).
async fn start_each<F: Future>(
    attempts: Vec<F>,
) -> impl futures_util::Stream<Item = F::Output> + Unpin {
    let mut answered = Vec::new();
    let running = FuturesUnordered::new();
    for attempt in attempts {
        let mut attempt = Box::pin(attempt);
        match futures_util::poll!(attempt.as_mut()) {
            Poll::Ready(outcome) => answered.push(outcome),
            Poll::Pending => running.push(attempt),
        }
    }
    futures_util::stream::iter(answered).chain(running)
}

/// Attempts on every selectable instance at once. Any failure or application error
/// fails the call (the first one is returned), else the last success answers it. A
/// closing provider's refusal is skipped: it is leaving, and every other instance got
/// the request.
async fn all(mut call: Box<Call>) -> Answer {
    if !call.body.is_complete() {
        return Err(Box::new(not_whole_for_broadcast(&call)));
    }
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

/// The refusal of a broadcast whose request was not whole when the call began (a client
/// or bidirectional stream still being written, or any request larger than
/// `max_replay_bytes`, unary included): every instance needs all of it, and only one
/// attempt can have a request that is not kept. Nothing was sent.
fn not_whole_for_broadcast(call: &Call) -> tonic::Status {
    tonic::Status::failed_precondition(format!(
        "broadcast sends the whole request to every instance: this request was not \
         complete when the call began (a stream still being written), or is larger than \
         max_replay_bytes ({} bytes, counted as sent: framing and compression included); \
         nothing was sent",
        call.stack.config.max_replay_bytes
    ))
}

#[cfg(test)]
mod tests;
