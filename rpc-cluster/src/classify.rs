//! What the result of one attempt means: success, an application error, or a failure —
//! and for a failure, whether the request may have run.
//!
//! The certainty that a request did *not* run is what makes retrying a non-idempotent
//! method safe. We are certain when the provider said so (`rpc-not-executed`), when
//! HTTP/2 refused the stream (REFUSED_STREAM, or a GOAWAY from the peer whose last
//! stream id excludes ours), when the transport says it never left
//! (`lossless_rpc_transport::NotSent`: no connection, or a connection that took no new
//! stream), or when the request body was never even polled.

use std::error::Error as StdError;
use std::sync::Arc;

use http::Response;
use rpc_core::BoxError;
use rpc_core::metadata::{self, CLOSING, GRPC_STATUS, NOT_EXECUTED, NOT_EXECUTED_OVERLOADED};
use tonic::Code;
use tonic::body::Body as TonicBody;

/// How an attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The provider refused it because it is shutting down (`rpc-not-executed`). Not
    /// run; re-routed to another instance under every strategy.
    Rejected,
    /// Certainly not run: no connection, stream refused (`REFUSED_STREAM`, or a GOAWAY
    /// whose last stream id excludes it), or body never sent. Re-sent once without
    /// counting as a retry, the same instance included: the GOAWAY closes a
    /// *connection*, and a new one to the same address may reach the process that now
    /// serves it (a hot upgrade's new generation).
    NotSent,
    /// `UNAVAILABLE` from the provider (may have run).
    Unavailable,
    /// The connection broke after the request was sent (may have run).
    Transport,
    /// No response within the attempt's timeout (may have run).
    Timeout,
    /// The provider refused it at its concurrency limit (`rpc-not-executed:
    /// overloaded`, status `RESOURCE_EXHAUSTED`). Not run, and the instance stays in
    /// service: a call re-routes it to another instance once, without counting a retry;
    /// a second refusal ends the call with RESOURCE_EXHAUSTED (failover does not retry
    /// it). Each re-route is more work for a fleet that may be overloaded as a whole, so
    /// an overload costs at most one extra attempt per call, never a storm of them.
    Overloaded,
}

impl FailureKind {
    /// Every kind, in the order of [`FailureKind::index`].
    pub const ALL: [FailureKind; 6] = [
        Self::Rejected,
        Self::NotSent,
        Self::Unavailable,
        Self::Transport,
        Self::Timeout,
        Self::Overloaded,
    ];

    /// The kind's position in [`FailureKind::ALL`], for per-kind counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The kind in snake case (`not_sent`, ...), as metrics and traces label it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::NotSent => "not_sent",
            Self::Unavailable => "unavailable",
            Self::Transport => "transport",
            Self::Timeout => "timeout",
            Self::Overloaded => "overloaded",
        }
    }

    /// Whether the request may have been executed by the provider.
    pub fn maybe_executed(self) -> bool {
        matches!(self, Self::Unavailable | Self::Transport | Self::Timeout)
    }

    /// Whether the failure counts toward ejecting the instance. A rejection is the
    /// instance's orderly goodbye, an overload refusal its protection, not a fault.
    pub fn counts_against_instance(self) -> bool {
        !matches!(self, Self::Rejected | Self::Overloaded)
    }
}

/// The meaning of one attempt's result.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A response with no error status in its headers (a stream may still end with one).
    Success(Response<TonicBody>),
    /// A trailers-only error response that is about the request, not the instance
    /// (INVALID_ARGUMENT, NOT_FOUND, ...): returned to the caller, never retried.
    AppError(Response<TonicBody>),
    /// A failure of the attempt.
    Failure(Failure),
}

/// A failed attempt, with what to give the caller if it is not retried.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) kind: FailureKind,
    pub(crate) response: Result<Response<TonicBody>, BoxError>,
}

impl Failure {
    pub(crate) fn error(kind: FailureKind, error: impl Into<BoxError>) -> Self {
        Self {
            kind,
            response: Err(error.into()),
        }
    }

    /// Whether no connection could be made within the connect timeout: the host did not
    /// answer at all (vanished, paused, or a network dropping everything in between),
    /// as opposed to refusing.
    pub(crate) fn dial_timed_out(&self) -> bool {
        self.kind == FailureKind::NotSent
            && self.response.as_ref().err().is_some_and(|error| {
                sources(&**error)
                    .filter_map(|e| e.downcast_ref::<std::io::Error>())
                    .any(|io| io.kind() == std::io::ErrorKind::TimedOut)
            })
    }

    pub(crate) fn status(kind: FailureKind, status: tonic::Status) -> Self {
        Self {
            kind,
            response: Ok(status.into_http()),
        }
    }

    /// This failure in one line: the error's chain of causes, or the provider's status.
    pub(crate) fn summary(&self) -> String {
        match &self.response {
            Err(error) => sources(&**error)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(": "),
            Ok(response) => match tonic::Status::from_header_map(response.headers()) {
                Some(status) => format!("{:?}: {}", status.code(), status.message()),
                None => format!("HTTP {}", response.status()),
            },
        }
    }

    /// What the caller receives for this failure.
    ///
    /// A transport error becomes `UNAVAILABLE` (as gRPC's C++ and Java clients report a
    /// lost connection), keeping the error as the status's source. A provider's answer
    /// loses the marks that describe this hop (`rpc-not-executed`, `rpc-closing`): they
    /// are about the instance, not the caller's call, and a proxy that returns the status
    /// as its own would otherwise tell its caller that it did not run, or is closing.
    pub(crate) fn into_result(self) -> Result<Response<TonicBody>, BoxError> {
        match self.response {
            Ok(mut response) => {
                let headers = response.headers_mut();
                headers.remove(&NOT_EXECUTED);
                headers.remove(&CLOSING);
                Ok(response)
            }
            Err(error) => {
                // The whole chain: tonic's own message ("transport error") says nothing
                // of what happened (reset, closed, protocol error).
                let cause = sources(&*error)
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(": ");
                let message = match self.kind {
                    FailureKind::NotSent => format!("request not sent: {cause}"),
                    FailureKind::Rejected | FailureKind::Overloaded => {
                        format!("request not executed: {cause}")
                    }
                    _ => format!(
                        "connection failed after the request was sent (it may have run): {cause}"
                    ),
                };
                let mut status = tonic::Status::unavailable(message);
                status.set_source(Arc::from(error));
                Err(Box::new(status))
            }
        }
    }
}

/// Whether the response says the instance is going offline (any response may).
pub(crate) fn says_closing(response: &Response<TonicBody>) -> bool {
    response.headers().contains_key(&CLOSING)
}

/// Classifies a response that arrived.
pub(crate) fn classify_response(response: Response<TonicBody>) -> Outcome {
    if response.status() != http::StatusCode::OK {
        return Outcome::Failure(Failure {
            kind: FailureKind::Transport,
            response: Ok(response),
        });
    }
    // A status in the headers means a trailers-only response: an error (or an OK with
    // no message). Every other header lookup is needed only then.
    let code = match metadata::header(response.headers(), &GRPC_STATUS) {
        None => return Outcome::Success(response),
        Some(value) => Code::from_bytes(value.as_bytes()),
    };
    if let Some(reason) = response.headers().get(&NOT_EXECUTED) {
        let kind = if reason == NOT_EXECUTED_OVERLOADED {
            FailureKind::Overloaded
        } else {
            FailureKind::Rejected
        };
        return Outcome::Failure(Failure {
            kind,
            response: Ok(response),
        });
    }
    match code {
        Code::Ok => Outcome::Success(response),
        Code::Unavailable => Outcome::Failure(Failure {
            kind: FailureKind::Unavailable,
            response: Ok(response),
        }),
        _ => Outcome::AppError(response),
    }
}

/// Classifies a transport error; `sent` tells whether the request body was polled.
pub(crate) fn classify_error(error: BoxError, sent: bool) -> Failure {
    let kind = if !sent || refused_by_goaway(&*error) || certainly_not_sent(&*error) {
        FailureKind::NotSent
    } else {
        FailureKind::Transport
    };
    Failure::error(kind, error)
}

fn sources<'a>(
    error: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(error), |e: &&'a (dyn StdError + 'static)| {
        (*e).source()
    })
}

/// A GOAWAY from the provider whose last stream id is below ours: the provider is
/// closing and did not process the stream (RFC 9113 §6.8).
fn refused_by_goaway(error: &(dyn StdError + 'static)) -> bool {
    sources(error)
        .filter_map(|e| e.downcast_ref::<h2::Error>())
        .any(|e| e.is_go_away() && e.is_remote() && e.reason() == Some(h2::Reason::NO_ERROR))
}

fn certainly_not_sent(error: &(dyn StdError + 'static)) -> bool {
    sources(error).any(|e| {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        e.is::<rpc_transport::NotSent>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_status(code: Code) -> Response<TonicBody> {
        tonic::Status::new(code, "x").into_http()
    }

    #[test]
    fn responses_are_told_apart() {
        assert!(matches!(
            classify_response(Response::new(TonicBody::empty())),
            Outcome::Success(_)
        ));
        assert!(matches!(
            classify_response(with_status(Code::NotFound)),
            Outcome::AppError(_)
        ));
        assert!(matches!(
            classify_response(with_status(Code::Unavailable)),
            Outcome::Failure(Failure {
                kind: FailureKind::Unavailable,
                ..
            })
        ));
        let mut rejected = with_status(Code::Unavailable);
        rejected
            .headers_mut()
            .insert(NOT_EXECUTED, "closing".parse().unwrap());
        assert!(matches!(
            classify_response(rejected),
            Outcome::Failure(Failure {
                kind: FailureKind::Rejected,
                ..
            })
        ));
        let mut overloaded = with_status(Code::ResourceExhausted);
        overloaded
            .headers_mut()
            .insert(NOT_EXECUTED, NOT_EXECUTED_OVERLOADED);
        assert!(matches!(
            classify_response(overloaded),
            Outcome::Failure(Failure {
                kind: FailureKind::Overloaded,
                ..
            })
        ));
        // Without the mark, RESOURCE_EXHAUSTED is the application's answer.
        assert!(matches!(
            classify_response(with_status(Code::ResourceExhausted)),
            Outcome::AppError(_)
        ));
    }

    #[test]
    fn the_caller_gets_the_status_without_the_marks_of_the_hop() {
        let mut refused = with_status(Code::ResourceExhausted);
        refused
            .headers_mut()
            .insert(NOT_EXECUTED, NOT_EXECUTED_OVERLOADED);
        refused
            .headers_mut()
            .insert(CLOSING, "true".parse().unwrap());
        let Outcome::Failure(failure) = classify_response(refused) else {
            panic!("an overload refusal is a failure");
        };
        let answer = failure.into_result().expect("the provider's answer");
        assert!(answer.headers().get(&NOT_EXECUTED).is_none());
        assert!(answer.headers().get(&CLOSING).is_none());
        assert_eq!(
            answer.headers().get(&GRPC_STATUS).unwrap(),
            "8",
            "the status itself is kept"
        );
    }

    #[test]
    fn unsent_requests_are_not_executed() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            classify_error(Box::new(refused), true).kind,
            FailureKind::NotSent
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(
            classify_error(Box::new(reset), false).kind,
            FailureKind::NotSent
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(
            classify_error(Box::new(reset), true).kind,
            FailureKind::Transport
        );
    }

    #[test]
    fn every_kind_is_listed_at_its_index() {
        for (index, kind) in FailureKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), index, "{}", kind.as_str());
        }
    }

    #[test]
    fn only_maybe_executed_failures_need_idempotency() {
        assert!(!FailureKind::Rejected.maybe_executed());
        assert!(!FailureKind::NotSent.maybe_executed());
        assert!(FailureKind::Timeout.maybe_executed());
        assert!(!FailureKind::Rejected.counts_against_instance());
        assert!(!FailureKind::Overloaded.maybe_executed());
        assert!(!FailureKind::Overloaded.counts_against_instance());
        assert!(FailureKind::NotSent.counts_against_instance());
    }

    #[test]
    fn only_a_dial_that_got_no_answer_timed_out() {
        let no_answer = || std::io::Error::new(std::io::ErrorKind::TimedOut, "connect_timeout");
        let wrapped: BoxError = Box::new(tonic::Status::from_error(Box::new(no_answer())));
        assert!(classify_error(Box::new(no_answer()), false).dial_timed_out());
        assert!(classify_error(wrapped, false).dial_timed_out());
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!classify_error(Box::new(refused), false).dial_timed_out());
        // After the request left, no answer is the attempt's timeout, not the dial's.
        assert!(!classify_error(Box::new(no_answer()), true).dial_timed_out());
    }
}
