//! Errors the cluster layer itself produces.
//!
//! Callers see them as a [`tonic::Status`] (code `UNAVAILABLE`) whose `source()` is a
//! [`ClusterError`], so generated clients need nothing special and code that wants the
//! cause can downcast it.

use std::sync::Arc;

use rpc_core::ServiceKey;

/// Why the cluster could not send a call anywhere.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The directory knows no selectable instance of the service.
    #[error("no provider available for {service}")]
    NoProvider {
        /// The referenced service.
        service: ServiceKey,
    },
}

impl ClusterError {
    /// This error as the `UNAVAILABLE` status callers receive.
    pub fn into_status(self) -> tonic::Status {
        let mut status = tonic::Status::unavailable(self.to_string());
        status.set_source(Arc::new(self));
        status
    }

    /// As [`ClusterError::into_status`], its message followed by what the last attempt,
    /// on an instance that has gone since, failed with.
    pub(crate) fn into_status_after(self, last_attempt: &str) -> tonic::Status {
        let message = format!("{self}; the last attempt failed: {last_attempt}");
        let mut status = tonic::Status::unavailable(message);
        status.set_source(Arc::new(self));
        status
    }
}
