//! Sending one attempt to one instance, bounded by the attempt's timeout, watched for
//! an answer that is overdue, and telling what its result means (`classify.rs`).
//!
//! **Overdue answers.** A host that vanished (no reset, no ICMP) or a process that is
//! paused answers nothing and refuses nothing: left alone, its calls wait for their
//! timeouts (seconds) and new calls keep going to it. So a call whose answer (its
//! response head) is later than its instance's latency allows — `stall_factor` times
//! the peak-EWMA estimate, never before `stall_floor` — *suspects* the instance: no call
//! picks it while a PING checks its connection ([`SendReport::probe`]). A PING answered
//! lifts the suspicion (the instance is alive, only slow: P2C weighs the age of what it
//! owes, `invoker.rs`); one unanswered closes the connection, so the calls on it end at
//! once — as not sent if their stream never opened, else as failed, and re-sent
//! elsewhere when idempotent — and the instance is ejected (`learn.rs`).
//!
//! **Overdue dials.** An instance this consumer has no connection to yet (new to it, or
//! its connection closed) is dialled by the first call that picks it. When that call's
//! answer is overdue while the dial is still under way, the host is slow to even accept
//! a connection (paused, vanished, or a lost SYN): the attempt leaves the dial, as not
//! sent, and its call goes to another instance at once, while the dial goes on in the
//! background with the instance suspected (`slow_dial.rs`). An attempt that picked an
//! instance already unavailable (panic mode) or the last resort — nothing better was
//! left — waits the dial out.
//!
//! Only a call whose request was complete when it began (unary, server streaming) is
//! watched: a client stream's answer comes when its caller has finished sending.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use rpc_core::{BoxError, GuardedBody};
use rpc_transport::{InstanceConnection, Liveness, ResponseBody, SendReport};
use tokio::time::Instant;
use tonic::body::Body as TonicBody;

use crate::classify::{Failure, FailureKind, Outcome, classify_error, classify_response};
use crate::health::Availability;
use crate::invoker::{ActiveCall, Invoker, Suspicion};
use crate::replay::RequestEnd;

/// One attempt as it came back from its instance.
pub(super) struct Dispatched {
    /// What the result means.
    pub(super) outcome: Outcome,
    /// When the attempt was sent.
    pub(super) started: Instant,
    /// Whether its connection was closed because it did not answer a PING.
    pub(super) unresponsive: bool,
    /// The suspicion of an instance whose dial the attempt left overdue: held until
    /// that dial ends (`slow_dial.rs`).
    pub(super) left_dial: Option<Suspicion>,
    /// Counts the attempt in the instance's calls in flight.
    in_flight: ActiveCall,
}

impl Dispatched {
    /// The outcome for the caller. A success's body keeps the attempt counted in flight
    /// until the body ends, so a stream counts until its last message.
    pub(super) fn into_outcome(self) -> Outcome {
        match self.outcome {
            Outcome::Success(response) => Outcome::Success(
                response.map(|body| TonicBody::new(GuardedBody::new(body, self.in_flight))),
            ),
            other => other,
        }
    }
}

/// How one attempt waits for its answer.
#[derive(Clone, Debug)]
pub(super) struct Wait {
    /// Bound on the attempt, until its response head.
    pub(super) timeout: Option<Duration>,
    /// For a request still being written: a bound that starts when it ends (its
    /// caller finished writing), and the signal of that end.
    pub(super) after_request: Option<(Duration, RequestEnd)>,
    /// Whether an overdue answer has its connection checked (a complete request).
    pub(super) watch_overdue: bool,
    /// Whether the call wrote the attempt's `traceparent` (not the caller): an exporter's
    /// ids for the attempt's span replace it then (`telemetry::exported_ids`).
    pub(super) own_trace: bool,
}

/// Sends `request` to `invoker` and waits for its answer as `wait` says. An instance
/// due for its probe gets this attempt as the probe: its connection must answer a PING
/// before the request goes (an instance ejected because it stopped answering may still
/// accept connections — a paused process's kernel does — and a request sent into it
/// would wait for its timeout); if it does not, the request is not sent, and goes
/// elsewhere.
pub(super) async fn dispatch(
    invoker: &Arc<Invoker>,
    request: Request<TonicBody>,
    wait: Wait,
) -> Dispatched {
    let started = Instant::now();
    // In flight before counted dispatched: whoever reads the count of attempts and then
    // the calls in flight (what was in flight on an instance at a moment) never misses
    // an attempt between the two.
    let in_flight = invoker.start_call();
    let stamp = invoker.note_dispatch(started);
    let availability = invoker.health().availability(started);
    let probe = availability == Availability::Probe && invoker.health().begin_probe(started);
    // Only a pick of a selectable, listed instance may leave its dial: a panic-mode pick
    // or the last resort (removed, kept because none was left) had nothing better to
    // go to.
    let may_leave_dial = availability == Availability::Ready && !invoker.is_removed();
    let report = SendReport::default();
    let mut left_dial = None;
    let outcome = match invoker.channel() {
        None => Outcome::Failure(Failure::status(
            FailureKind::NotSent,
            tonic::Status::unavailable(format!("instance {} is gone", invoker.authority())),
        )),
        Some(channel) => match probe_first(probe, &channel).await {
            Err(failure) => Outcome::Failure(failure),
            Ok(()) => {
                let unanswered = invoker.await_answer(stamp);
                // Boxed: inline, the transport's future made every layer above (the
                // attempt's span, the call's box) copy kilobytes per call.
                let response = Box::pin(channel.send(request, &report));
                let answer = answer(invoker, response, &report, started, wait, may_leave_dial);
                let answer = answer.await;
                drop(unanswered);
                match answer {
                    Answer::Response(Ok(response)) => {
                        classify_response(response.map(TonicBody::new))
                    }
                    Answer::Response(Err(error)) => {
                        Outcome::Failure(classify_error(error, report.stream_opened()))
                    }
                    Answer::TimedOut(limit) => Outcome::Failure(timed_out(invoker, limit, &report)),
                    Answer::Removed => Outcome::Failure(removed(invoker, &report)),
                    Answer::DialOverdue(suspicion) => {
                        left_dial = Some(suspicion);
                        Outcome::Failure(dial_overdue(invoker, started))
                    }
                }
            }
        },
    };
    if report.stream_opened() {
        invoker.note_sent(stamp);
    }
    Dispatched {
        outcome,
        started,
        unresponsive: report.connection_unresponsive(),
        left_dial,
        in_flight,
    }
}

/// For an ejected instance's probe, checks that its connection answers first; a
/// failed check is a failure of a request that was not sent.
async fn probe_first(probe: bool, channel: &InstanceConnection) -> Result<(), Failure> {
    if !probe {
        return Ok(());
    }
    // Boxed: rare, and its dial would otherwise sit in every attempt's future.
    Box::pin(channel.check())
        .await
        .map_err(|error| classify_error(error, false))
}

/// How the wait for an answer ended.
enum Answer {
    Response(Result<Response<ResponseBody>, BoxError>),
    TimedOut(Duration),
    /// The instance was removed and its expiry passed with the call still running.
    Removed,
    /// The answer was overdue with the request still waiting for its connection's dial:
    /// it was left, not sent; the instance stays suspected while the dial goes on.
    DialOverdue(Suspicion),
}

/// Waits for `response`: until the attempt's deadline, or, without one, until the
/// instance's removal expires; once the answer is overdue, with the instance suspected
/// while its connection is checked — or, if `may_leave_dial` and the request is still
/// waiting for its connection's dial, not at all.
async fn answer(
    invoker: &Arc<Invoker>,
    response: impl Future<Output = Result<Response<ResponseBody>, BoxError>>,
    report: &SendReport,
    started: Instant,
    wait: Wait,
    may_leave_dial: bool,
) -> Answer {
    tokio::pin!(response);
    let deadline = wait.timeout.map(|limit| (started + limit, limit));
    let overdue = wait
        .watch_overdue
        .then(|| invoker.overdue_at(started))
        .flatten()
        .filter(|overdue| deadline.is_none_or(|(deadline, _)| *overdue < deadline));
    if let Some(overdue) = overdue {
        // 1. Until the answer is overdue (the timer the deadline would use anyway).
        if let Ok(result) = tokio::time::timeout_at(overdue, response.as_mut()).await {
            return Answer::Response(result);
        }
        // 2. Overdue: rare, so its futures live in a box of their own rather than in
        //    every call's.
        return Box::pin(when_overdue(
            invoker,
            response,
            report,
            deadline,
            may_leave_dial,
        ))
        .await;
    }
    match wait.after_request {
        Some((limit, end)) => after_the_request(invoker, response, deadline, limit, end).await,
        None => rest_of_the_wait(invoker, response, deadline).await,
    }
}

/// The wait of a request still being written: as [`rest_of_the_wait`], and once its
/// caller has finished writing it, at most `limit` more (an upload takes as long as
/// its caller writes; its answer is due after).
async fn after_the_request(
    invoker: &Invoker,
    response: impl Future<Output = Result<Response<ResponseBody>, BoxError>>,
    deadline: Option<(Instant, Duration)>,
    limit: Duration,
    mut end: RequestEnd,
) -> Answer {
    let after_end = async {
        // A body dropped unfinished ends the attempt's stream: its response says so.
        if end.wait_for(|ended| *ended).await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(limit).await;
        Answer::TimedOut(limit)
    };
    tokio::select! {
        biased;
        answer = rest_of_the_wait(invoker, response, deadline) => answer,
        answer = after_end => answer,
    }
}

/// The wait of a call whose answer is overdue: unless the peer has sent anything since
/// the request left (it was alive after it: the call is only slow), no call picks the
/// instance until its connection answers a PING; then the rest of the wait (a
/// connection closed as unresponsive ends its calls now). A request still waiting for
/// its connection's dial is left at once when `may_leave_dial`.
async fn when_overdue(
    invoker: &Arc<Invoker>,
    mut response: Pin<&mut impl Future<Output = Result<Response<ResponseBody>, BoxError>>>,
    report: &SendReport,
    deadline: Option<(Instant, Duration)>,
    may_leave_dial: bool,
) -> Answer {
    if !report.heard_since_opened() {
        let suspicion = invoker.suspect(Instant::now());
        if may_leave_dial && !report.reached_connection() {
            tracing::debug!(instance = %invoker.id(), "dial overdue: attempt left it, instance suspected");
            return Answer::DialOverdue(suspicion);
        }
        tracing::debug!(instance = %invoker.id(), stream_opened = report.stream_opened(), "answer overdue: instance suspected");
        let checked = tokio::select! {
            biased;
            result = response.as_mut() => return Answer::Response(result),
            answer = until_deadline_or_removed(invoker, deadline) => return answer,
            liveness = probe_or_await_connection(report) => liveness,
        };
        drop(suspicion);
        if checked == Some(Liveness::Unresponsive) {
            tracing::warn!(
                instance = %invoker.id(),
                "no answer to a PING while a call was overdue: connection closed"
            );
        }
    }
    rest_of_the_wait(invoker, response, deadline).await
}

/// The PING check of the connection the request went on; for a request still waiting
/// for its connection (a dial under way, which a panic-mode pick waits out), never: the
/// instance stays suspected until the dial ends the call's wait (the answer, or NotSent
/// at the connect timeout). A dial to
/// a host that stopped answering otherwise took every call picked meanwhile for up to
/// the connect timeout; the fleet simulator found it (a consumer restarted while a
/// provider's host was paused; seeds 14, 20 and 82 of `sim/tests/schedules.rs`).
async fn probe_or_await_connection(report: &SendReport) -> Option<Liveness> {
    match report.probe().await {
        Some(liveness) => Some(liveness),
        None => std::future::pending().await,
    }
}

/// Waits for `response` until the deadline, or without one until the instance's
/// removal expires.
async fn rest_of_the_wait(
    invoker: &Invoker,
    response: impl Future<Output = Result<Response<ResponseBody>, BoxError>>,
    deadline: Option<(Instant, Duration)>,
) -> Answer {
    tokio::select! {
        biased;
        result = response => Answer::Response(result),
        answer = until_deadline_or_removed(invoker, deadline) => answer,
    }
}

/// Resolves at the attempt's deadline, or, for an attempt without one, when its removed
/// instance's expiry passes (a removed instance's calls are cancelled then).
async fn until_deadline_or_removed(
    invoker: &Invoker,
    deadline: Option<(Instant, Duration)>,
) -> Answer {
    match deadline {
        Some((at, limit)) => {
            tokio::time::sleep_until(at).await;
            Answer::TimedOut(limit)
        }
        None => {
            invoker.destroyed().cancelled().await;
            Answer::Removed
        }
    }
}

/// No response within `limit`: the request may have run, if its stream opened.
fn timed_out(invoker: &Invoker, limit: Duration, report: &SendReport) -> Failure {
    let message = if report.stream_opened() {
        format!(
            "no response from {} within {} ms",
            invoker.authority(),
            limit.as_millis()
        )
    } else {
        format!(
            "no stream to {} within {} ms (not sent)",
            invoker.authority(),
            limit.as_millis()
        )
    };
    let kind = if report.stream_opened() {
        FailureKind::Timeout
    } else {
        FailureKind::NotSent
    };
    Failure::status(kind, tonic::Status::deadline_exceeded(message))
}

/// The attempt left a dial that was overdue: certainly not sent.
fn dial_overdue(invoker: &Invoker, started: Instant) -> Failure {
    Failure::status(
        FailureKind::NotSent,
        tonic::Status::unavailable(format!(
            "no connection to {} within {} ms, when an answer was due (not sent; the dial goes on)",
            invoker.authority(),
            started.elapsed().as_millis()
        )),
    )
}

/// The instance was removed and its expiry passed with the call still running.
fn removed(invoker: &Invoker, report: &SendReport) -> Failure {
    let kind = if report.stream_opened() {
        FailureKind::Transport
    } else {
        FailureKind::NotSent
    };
    Failure::status(
        kind,
        tonic::Status::unavailable(format!("instance {} was removed", invoker.authority())),
    )
}
