//! What a re-opened request repeats of the original, and which instance served a call.

use http::Response;
use rpc_core::InstanceId;
use tonic::body::Body as TonicBody;

use super::ServedBy;

/// What a re-opened request repeats of the original one.
#[derive(Clone, Debug)]
pub(super) struct RequestHead {
    pub(super) method: http::Method,
    pub(super) uri: http::Uri,
    pub(super) version: http::Version,
    pub(super) headers: http::HeaderMap,
}

impl RequestHead {
    pub(super) fn of(parts: &http::request::Parts) -> Self {
        Self {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            version: parts.version,
            headers: parts.headers.clone(),
        }
    }
}

/// The response of the instance that served the call, as reported by the cluster.
pub(super) fn served_by(response: &mut Response<TonicBody>) -> Option<InstanceId> {
    response
        .extensions_mut()
        .remove::<ServedBy>()
        .map(|served| served.0)
}
