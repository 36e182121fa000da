//! Sending one attempt to one instance, bounded by the attempt's timeout, and telling
//! what its result means (`classify.rs`).

use std::sync::Arc;
use std::time::Duration;

use http::Request;
use rpc_core::GuardedBody;
use tokio::time::Instant;
use tonic::body::Body as TonicBody;
use tower::ServiceExt;

use crate::classify::{Failure, FailureKind, Outcome, classify_error, classify_response};
use crate::health::Availability;
use crate::invoker::{ActiveCall, Invoker};
use crate::replay::SentFlag;

/// One attempt as it came back from its instance.
pub(super) struct Dispatched {
    /// What the result means.
    pub(super) outcome: Outcome,
    /// When the attempt was sent.
    pub(super) started: Instant,
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

/// Sends `request` to `invoker`, bounded by `timeout`; `sent` tells whether the body was
/// read. An instance due for its probe gets this attempt as the probe.
pub(super) async fn dispatch(
    invoker: &Arc<Invoker>,
    request: Request<TonicBody>,
    timeout: Option<Duration>,
    sent: &SentFlag,
) -> Dispatched {
    let started = Instant::now();
    invoker.note_dispatch(started);
    if invoker.health().availability(started) == Availability::Probe {
        invoker.health().begin_probe(started);
    }
    let in_flight = invoker.start_call();
    let outcome = match invoker.channel() {
        None => Outcome::Failure(Failure::status(
            FailureKind::NotSent,
            tonic::Status::unavailable(format!("instance {} is gone", invoker.authority())),
        )),
        Some(channel) => {
            let response = channel.oneshot(request);
            // A removed instance's calls are cancelled when its expiry passes. With a
            // timeout (the default) the call ends sooner anyway, so only untimed calls
            // pay for watching the cancellation.
            let result = match timeout {
                // The deadline from the clock already read saves a second read.
                Some(limit) => tokio::time::timeout_at(started + limit, response)
                    .await
                    .map_err(|_| Some(limit)),
                None => tokio::select! {
                    biased;
                    _ = invoker.destroyed().cancelled() => Err(None),
                    result = response => Ok(result),
                },
            };
            match result {
                Ok(Ok(response)) => classify_response(response.map(TonicBody::new)),
                Ok(Err(error)) => Outcome::Failure(classify_error(error, sent.was_sent())),
                Err(Some(limit)) => Outcome::Failure(timed_out(invoker, limit)),
                Err(None) => Outcome::Failure(removed(invoker, sent)),
            }
        }
    };
    Dispatched {
        outcome,
        started,
        in_flight,
    }
}

/// No response within `limit`: the request may have run.
fn timed_out(invoker: &Invoker, limit: Duration) -> Failure {
    Failure::status(
        FailureKind::Timeout,
        tonic::Status::deadline_exceeded(format!(
            "no response from {} within {} ms",
            invoker.authority(),
            limit.as_millis()
        )),
    )
}

/// The instance was removed and its expiry passed with the call still running.
fn removed(invoker: &Invoker, sent: &SentFlag) -> Failure {
    let kind = if sent.was_sent() {
        FailureKind::Transport
    } else {
        FailureKind::NotSent
    };
    Failure::status(
        kind,
        tonic::Status::unavailable(format!("instance {} was removed", invoker.authority())),
    )
}
