//! Metadata keys (HTTP/2 headers) that providers and consumers of rpc exchange.
//!
//! gRPC reserves the `grpc-` prefix, so ours start with `rpc-`. A plain gRPC client that
//! does not know them loses nothing: it sees an ordinary status.

use std::time::Duration;

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

/// The caller's deadline from the [`GRPC_TIMEOUT`] header, if it has a valid one.
///
/// The value is an integer followed by one unit letter (gRPC over HTTP/2, "Timeout"):
/// `H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds,
/// `n` nanoseconds; `500m` is half a second. `None` when the header is absent or
/// malformed; a huge value saturates rather than overflowing. Consumers read it to
/// bound each attempt by the smaller of the caller's deadline and their own timeout.
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(&GRPC_TIMEOUT)?.to_str().ok()?;
    let (amount, unit) = value.split_at(value.len().checked_sub(1)?);
    let amount: u64 = amount.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_header_is_read() {
        let mut headers = HeaderMap::new();
        assert_eq!(grpc_timeout(&headers), None);
        headers.insert(GRPC_TIMEOUT, "250m".parse().unwrap());
        assert_eq!(grpc_timeout(&headers), Some(Duration::from_millis(250)));
        headers.insert(GRPC_TIMEOUT, "3S".parse().unwrap());
        assert_eq!(grpc_timeout(&headers), Some(Duration::from_secs(3)));
        headers.insert(GRPC_TIMEOUT, "x".parse().unwrap());
        assert_eq!(grpc_timeout(&headers), None);
    }
}
