//! What a re-opened request repeats of the original and what it carries (the request
//! framed, the metadata from the moved stream, what is left of the deadline), and which
//! instance served a call.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Response};
use rpc_core::InstanceId;
use rpc_core::is_reserved;
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

/// The keys of `trailers` that are the application's (what the handler gave `moved`).
pub(super) fn application_keys(trailers: &HeaderMap) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in trailers {
        if !is_reserved(name.as_str()) {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

/// `message` with gRPC's prefix (not compressed).
pub(super) fn framed(message: &Bytes) -> Bytes {
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.extend_from_slice(message);
    framed.freeze()
}

/// `left` as a `grpc-timeout` value: milliseconds while they fit in 8 digits, rounded up
/// so a deadline not passed is never sent as 0.
pub(super) fn timeout_value(left: Duration) -> HeaderValue {
    let millis = left.as_micros().div_ceil(1000);
    let value = if millis < 100_000_000 {
        format!("{millis}m")
    } else {
        format!("{}S", left.as_secs().min(99_999_999))
    };
    HeaderValue::try_from(value).unwrap_or(HeaderValue::from_static("99999999S"))
}
