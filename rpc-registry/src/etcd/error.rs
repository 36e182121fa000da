//! What etcd-client's errors mean here, and how they read.
//!
//! [`is_unavailable`] tells "no server answered" (unreachable: keep the last known state,
//! retry) from "the server said no" (e.g. bad credentials); [`is_lease_gone`] tells that a
//! lease was forgotten (register again under a new one).
//!
//! A gRPC status from etcd-client prints its transport cause in Rust debug form
//! (`source: tonic::transport::Error(Transport, ConnectError(...))`), which is noise in
//! an error a person reads. [`EtcdError`] prints the status code, its message and the
//! innermost cause (`Connection refused (os error 111)`) instead, and keeps the chain
//! for code that walks it.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::remote::retry::{Failure, bounded};

/// An error of etcd-client, displayed on one line.
#[derive(Debug)]
pub(super) struct EtcdError(pub(super) etcd_client::Error);

impl fmt::Display for EtcdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            etcd_client::Error::GRpcStatus(status) => {
                write!(f, "{}", status.code().description())?;
                if !status.message().is_empty() {
                    write!(f, ": {}", status.message())?;
                }
                if let Some(cause) = innermost(status.source()) {
                    write!(f, " ({cause})")?;
                }
                Ok(())
            }
            other => write!(f, "{other}"),
        }
    }
}

impl Error for EtcdError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &self.0 {
            etcd_client::Error::GRpcStatus(status) => status.source(),
            other => other.source(),
        }
    }
}

/// [`bounded`] for an etcd-client request, its error printed on one line.
pub(super) async fn call<T>(
    bound: Duration,
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Failure<EtcdError>> {
    bounded(bound, async { request.await.map_err(EtcdError) }).await
}

/// Whether `error` means "no server answered" rather than "the server said no".
pub(super) fn is_unavailable(error: &EtcdError) -> bool {
    match &error.0 {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
        ),
        _ => false,
    }
}

/// Whether `error` says the lease a request named no longer exists.
pub(super) fn is_lease_gone(error: &EtcdError) -> bool {
    match &error.0 {
        etcd_client::Error::GRpcStatus(status) => status.code() == tonic::Code::NotFound,
        etcd_client::Error::LeaseKeepAliveError(message) => message.contains("not found"),
        _ => false,
    }
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

    #[test]
    fn a_status_prints_code_message_and_root_cause_without_debug_noise() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let mut status = tonic::Status::unavailable("tcp connect error");
        status.set_source(std::sync::Arc::new(io));
        let text = EtcdError(etcd_client::Error::GRpcStatus(status)).to_string();
        assert_eq!(
            text,
            "The service is currently unavailable: tcp connect error (Connection refused)"
        );
    }

    #[test]
    fn other_errors_keep_their_own_text() {
        let error = etcd_client::Error::InvalidArgs("bad key".into());
        assert_eq!(EtcdError(error).to_string(), "invalid arguments: bad key");
    }
}
