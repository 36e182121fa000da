//! etcd-client's errors with one-line messages.
//!
//! A gRPC status from etcd-client prints its transport cause in Rust debug form
//! (`source: tonic::transport::Error(Transport, ConnectError(...))`), which is noise in
//! an error a person reads. [`EtcdError`] prints the status code, its message and the
//! innermost cause (`Connection refused (os error 111)`) instead, and keeps the chain
//! for code that walks it.

use std::error::Error;
use std::fmt;

/// An error of etcd-client, displayed on one line.
#[derive(Debug)]
pub(crate) struct EtcdError(pub(crate) etcd_client::Error);

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
