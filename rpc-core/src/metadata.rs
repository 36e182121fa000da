//! Metadata keys (HTTP/2 headers) that providers and consumers of rpc exchange.
//!
//! gRPC reserves the `grpc-` prefix, so ours start with `rpc-`. A plain gRPC client that
//! does not know them loses nothing: it sees an ordinary status.

use http::HeaderValue;

/// Response header a provider adds from the first shutdown step on: "this instance is
/// going offline". Our consumers stop choosing the instance at once, before the registry
/// tells them (Dubbo-go's `closing` attachment). Value: `1`.
pub const CLOSING: &str = "rpc-closing";

/// Response header on a request the provider refused *before executing it* (value: the
/// reason, e.g. `closing`). Carried with status `UNAVAILABLE`; our consumers re-send such
/// a request to another instance under every cluster strategy.
pub const NOT_EXECUTED: &str = "rpc-not-executed";

/// Request header that overrides the reference's configured `retries` for one call
/// (a decimal number; `0` means exactly one attempt).
pub const RETRIES: &str = "rpc-retries";

/// Default request header whose value the `consistent_hash` load balance hashes.
pub const HASH_KEY: &str = "rpc-hash-key";

/// The value of [`CLOSING`].
pub const CLOSING_VALUE: HeaderValue = HeaderValue::from_static("1");

/// The value of [`NOT_EXECUTED`] when the provider is shutting down.
pub const NOT_EXECUTED_CLOSING: HeaderValue = HeaderValue::from_static("closing");
