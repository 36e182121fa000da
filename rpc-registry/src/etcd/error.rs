//! What the etcd client's errors mean here, and how they read.
//!
//! [`is_unavailable`] tells "no server answered" (unreachable: keep the last known state,
//! retry) from "the server said no" (e.g. bad credentials); [`is_lease_gone`] tells that a
//! lease was forgotten (register again under a new one); [`is_invalid_token`] tells that
//! the authentication token was refused (authenticate again, once).
//!
//! A gRPC status for a failed connection prints its transport cause in Rust debug form
//! (`source: tonic::transport::Error(Transport, ConnectError(...))`), which is noise in
//! an error a person reads. [`EtcdError`] prints the status code, its message and the
//! innermost cause (`Connection refused (os error 111)`) instead, and keeps the chain
//! for code that walks it (`Unreachability::of` looks there for a refusal).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use tonic::Code;

use crate::remote::retry::{Failure, bounded};

/// The message etcd answers a request with an invalid or expired token with (code
/// `Unauthenticated`; `Unknown` from etcd's services built on its in-process client).
const INVALID_AUTH_TOKEN: &str = "etcdserver: invalid auth token";

/// An error of the etcd client, displayed on one line.
#[derive(Debug)]
pub(super) enum EtcdError {
    /// A gRPC status: etcd's answer, or tonic's own when no member answered (then with
    /// the transport error as its source).
    Status(tonic::Status),
    /// The channel could not be set up: an endpoint that makes no URI, or TLS settings
    /// (certificates, key) that cannot be used. A fault of the configuration, not of the
    /// network.
    Setup(tonic::transport::Error),
    /// etcd answered a keep-alive of this lease with a TTL of 0: it no longer knows it.
    LeaseNotFound(i64),
    /// etcd answered something this client cannot use (a stream that ended before its
    /// first answer, a token that is not ASCII).
    Protocol(String),
}

impl fmt::Display for EtcdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(status) => {
                write!(f, "{}", status.code().description())?;
                if !status.message().is_empty() {
                    write!(f, ": {}", status.message())?;
                }
                if let Some(cause) = innermost(status.source()) {
                    write!(f, " ({cause})")?;
                }
                Ok(())
            }
            Self::Setup(error) => {
                write!(f, "cannot set up the connection to etcd: {error}")?;
                if let Some(cause) = innermost(error.source()) {
                    write!(f, " ({cause})")?;
                }
                Ok(())
            }
            Self::LeaseNotFound(lease) => write!(f, "etcd does not know lease {lease:x}"),
            Self::Protocol(message) => f.write_str(message),
        }
    }
}

impl Error for EtcdError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Status(status) => status.source(),
            Self::Setup(error) => error.source(),
            Self::LeaseNotFound(_) | Self::Protocol(_) => None,
        }
    }
}

impl From<tonic::Status> for EtcdError {
    fn from(status: tonic::Status) -> Self {
        Self::Status(status)
    }
}

/// [`bounded`] for a request of the etcd client, its error printed on one line.
pub(super) async fn call<T>(
    bound: Duration,
    request: impl Future<Output = Result<T, EtcdError>>,
) -> Result<T, Failure<EtcdError>> {
    bounded(bound, request).await
}

/// Whether `error` means "no server answered" rather than "the server said no": the
/// codes gRPC and tonic give a request no member answered (`Unavailable`, a deadline,
/// `Unknown`), or any status caused by a socket or transport error.
pub(super) fn is_unavailable(error: &EtcdError) -> bool {
    match error {
        EtcdError::Status(status) => {
            matches!(
                status.code(),
                Code::Unavailable | Code::DeadlineExceeded | Code::Unknown
            ) || caused_by_transport(status)
        }
        EtcdError::Setup(_) | EtcdError::LeaseNotFound(_) | EtcdError::Protocol(_) => false,
    }
}

/// Whether `error` says the lease a request named no longer exists.
pub(super) fn is_lease_gone(error: &EtcdError) -> bool {
    match error {
        EtcdError::Status(status) => status.code() == Code::NotFound,
        EtcdError::LeaseNotFound(_) => true,
        EtcdError::Setup(_) | EtcdError::Protocol(_) => false,
    }
}

/// Whether etcd refused the request's authentication token (invalid, or expired: etcd's
/// simple tokens expire after 5 minutes unused, and a restarted etcd knows none).
pub(super) fn is_invalid_token(status: &tonic::Status) -> bool {
    match status.code() {
        Code::Unauthenticated => true,
        Code::Unknown => status.message() == INVALID_AUTH_TOKEN,
        _ => false,
    }
}

/// Whether a request that failed with `status` should go to another member: none was
/// reached through this one (the connection could not be made or broke: a transport
/// cause), or the member says it cannot serve now (`Unavailable`: no leader, leader
/// changed, shutting down).
pub(super) fn try_another_member(status: &tonic::Status) -> bool {
    status.code() == Code::Unavailable || caused_by_transport(status)
}

/// Whether a socket or transport error is in the source chain of `status` (the
/// connection failed, whatever code tonic chose for it).
fn caused_by_transport(status: &tonic::Status) -> bool {
    let mut next = status.source();
    while let Some(error) = next {
        if error.is::<std::io::Error>() || error.is::<tonic::transport::Error>() {
            return true;
        }
        next = error.source();
    }
    false
}

/// The last error of the chain that starts at `error`.
fn innermost<'a>(
    mut error: Option<&'a (dyn Error + 'static)>,
) -> Option<&'a (dyn Error + 'static)> {
    while let Some(source) = error.and_then(Error::source) {
        error = Some(source);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> tonic::Status {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let mut status = tonic::Status::unavailable("tcp connect error");
        status.set_source(std::sync::Arc::new(io));
        status
    }

    #[test]
    fn a_status_prints_code_message_and_root_cause_without_debug_noise() {
        let text = EtcdError::Status(refused()).to_string();
        assert_eq!(
            text,
            "The service is currently unavailable: tcp connect error (Connection refused)"
        );
    }

    #[test]
    fn other_errors_keep_their_own_text() {
        let error = EtcdError::Protocol("invalid arguments: bad key".into());
        assert_eq!(error.to_string(), "invalid arguments: bad key");
        assert_eq!(
            EtcdError::LeaseNotFound(0x1f).to_string(),
            "etcd does not know lease 1f"
        );
    }

    #[test]
    fn no_answer_is_unavailable_and_a_refusal_by_etcd_is_not() {
        assert!(is_unavailable(&EtcdError::Status(refused())));
        assert!(is_unavailable(&EtcdError::Status(
            tonic::Status::deadline_exceeded("slow")
        )));
        // A connection reset mid-request: tonic may pick another code, the cause says it.
        let mut reset = tonic::Status::internal("h2 protocol error");
        reset.set_source(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(is_unavailable(&EtcdError::Status(reset)));
        let denied = tonic::Status::invalid_argument(
            "etcdserver: authentication failed, invalid user ID or password",
        );
        assert!(!is_unavailable(&EtcdError::Status(denied)));
        assert!(!is_unavailable(&EtcdError::LeaseNotFound(1)));
        assert!(!is_unavailable(&EtcdError::Protocol("odd".into())));
    }

    #[test]
    fn only_a_member_that_was_not_reached_or_cannot_serve_sends_a_request_on() {
        assert!(try_another_member(&refused()));
        assert!(try_another_member(&tonic::Status::unavailable(
            "etcdserver: leader changed"
        )));
        assert!(!try_another_member(&tonic::Status::unauthenticated(
            INVALID_AUTH_TOKEN
        )));
        assert!(!try_another_member(&tonic::Status::not_found(
            "etcdserver: requested lease not found"
        )));
    }

    #[test]
    fn a_forgotten_lease_and_a_refused_token_are_recognised() {
        let gone = tonic::Status::not_found("etcdserver: requested lease not found");
        assert!(is_lease_gone(&EtcdError::Status(gone)));
        assert!(is_lease_gone(&EtcdError::LeaseNotFound(7)));
        assert!(!is_lease_gone(&EtcdError::Status(refused())));

        assert!(is_invalid_token(&tonic::Status::unauthenticated(
            INVALID_AUTH_TOKEN
        )));
        assert!(is_invalid_token(&tonic::Status::unknown(
            INVALID_AUTH_TOKEN
        )));
        assert!(!is_invalid_token(&tonic::Status::unknown("other")));
        assert!(!is_invalid_token(&tonic::Status::permission_denied(
            "etcdserver: permission denied"
        )));
    }
}
