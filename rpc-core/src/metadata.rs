//! Metadata keys (HTTP/2 headers) that providers and consumers of rpc exchange.
//!
//! gRPC reserves the `grpc-` prefix, so ours start with `rpc-`. A plain gRPC client that
//! does not know them loses nothing: it sees an ordinary status.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Response header a provider adds from the first shutdown step on: "this instance is
/// going offline". Our consumers stop choosing the instance at once, before the registry
/// tells them (Dubbo-go's `closing` attachment). Value: `1`.
pub const CLOSING: HeaderName = HeaderName::from_static("rpc-closing");

/// Response header on a request the provider refused *before executing it* (value: the
/// reason, e.g. `closing`). Carried with status `UNAVAILABLE`; our consumers re-send such
/// a request to another instance under every cluster strategy.
pub const NOT_EXECUTED: HeaderName = HeaderName::from_static("rpc-not-executed");

/// Request header that overrides the reference's configured `retries` for one call
/// (a decimal number; `0` means exactly one attempt).
pub const RETRIES: HeaderName = HeaderName::from_static("rpc-retries");

/// Default request header whose value the `consistent_hash` load balance hashes.
pub const HASH_KEY: HeaderName = HeaderName::from_static("rpc-hash-key");

/// gRPC's status header; in the response headers it means a trailers-only (error)
/// response. Parsed once here, since looking a header up by string parses the name.
pub const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// gRPC's deadline header on requests (`500m`, `3S`, ...).
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// The value of [`CLOSING`].
pub const CLOSING_VALUE: HeaderValue = HeaderValue::from_static("1");

/// The value of [`NOT_EXECUTED`] when the provider is shutting down.
pub const NOT_EXECUTED_CLOSING: HeaderValue = HeaderValue::from_static("closing");

/// Trailers that end a gRPC response with `status` (`grpc-status`, `grpc-message`), for
/// a response body cut short (a deadline, a shutdown). Should the message not encode
/// (never one of ours), the code alone still says what happened.
pub fn status_trailers(status: &tonic::Status) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(GRPC_STATUS, HeaderValue::from(status.code() as i32));
    }
    trailers
}
