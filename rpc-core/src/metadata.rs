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

/// Request header every call of an rpc consumer carries (value: `1`): the caller reads
/// the [`CLOSING`] mark and re-sends a [`NOT_EXECUTED`] refusal to another instance. A
/// provider tells a caller without it in HTTP/2's own terms instead: its connection gets
/// GOAWAY as soon as the shutdown starts waiting for consumers, and a request it sends
/// once refusals have begun is refused with `REFUSED_STREAM` (see
/// `rpc-core/src/transport/peer.rs`).
pub const CONSUMER: HeaderName = HeaderName::from_static("rpc-consumer");

/// Request header that overrides the reference's configured `retries` for one call
/// (a decimal number; `0` means exactly one attempt).
pub const RETRIES: HeaderName = HeaderName::from_static("rpc-retries");

/// Default request header whose value the `consistent_hash` load balance hashes.
pub const HASH_KEY: HeaderName = HeaderName::from_static("rpc-hash-key");

/// gRPC's status header; in the response headers it means a trailers-only (error)
/// response. Parsed once here, since looking a header up by string parses the name.
pub const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// The value of `name` in `headers` — by a scan of the entries when there are few (a
/// gRPC response's headers and trailers hold one to three, a plain gRPC client's request
/// three or four), else by a hashed lookup.
///
/// Every call is looked at this way, several times (its deadline, its status, its
/// marks): hashing a name like `grpc-status` costs about 100 instructions, comparing it
/// with a handful of names a fraction of that (callgrind, `benches/instructions.sh`).
pub fn header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    /// Most entries scanned; beyond, the hashed lookup is the cheaper one.
    const MOST_SCANNED: usize = 4;
    if headers.len() > MOST_SCANNED {
        return headers.get(name);
    }
    headers
        .iter()
        .find_map(|(entry, value)| (entry == name).then_some(value))
}

/// gRPC's deadline header on requests (`500m`, `3S`, ...).
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// Trailer of a stream its handler ended because the instance is going offline
/// (`lossless_rpc::stream::moved`, value `1`), with status `UNAVAILABLE`: "moved, not
/// failed". Our consumers re-open such a stream of a method declared resumable on
/// another instance; the stream's other trailers say where to resume.
pub const STREAM_MOVED: HeaderName = HeaderName::from_static("rpc-stream-moved");

/// The value of [`CLOSING`].
pub const CLOSING_VALUE: HeaderValue = HeaderValue::from_static("1");

/// Path prefix of the gRPC health service (`grpc.health.v1.Health`). Health checks are
/// answered during shutdown (NOT_SERVING) and are no calls: they neither count as
/// traffic nor delay a drain, and a probe does not send a connection away.
pub const HEALTH_PATH_PREFIX: &str = "/grpc.health.v1.Health/";

/// Whether a request's `path` is a health check ([`HEALTH_PATH_PREFIX`]): the one test
/// that every filter exempting health checks applies (the graceful filter, the
/// concurrency limit, the transport's count of a peer's calls), so none can drift.
///
/// ```
/// use lossless_rpc_core::metadata::is_health_check;
/// assert!(is_health_check("/grpc.health.v1.Health/Check"));
/// assert!(!is_health_check("/helloworld.Greeter/SayHello"));
/// ```
pub fn is_health_check(path: &str) -> bool {
    path.starts_with(HEALTH_PATH_PREFIX)
}

/// The value of [`CONSUMER`].
pub const CONSUMER_VALUE: HeaderValue = HeaderValue::from_static("1");

/// The value of [`NOT_EXECUTED`] when the provider is shutting down.
pub const NOT_EXECUTED_CLOSING: HeaderValue = HeaderValue::from_static("closing");

/// In a response's extensions: the response is a closing refusal (`rpc-not-executed:
/// closing`). The provider's transport turns such a response into `REFUSED_STREAM` for a
/// plain client; it reads this marker rather than the header, which would cost a header
/// lookup (about 150 instructions) on every response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosingRefusal;

/// The value of [`NOT_EXECUTED`] when the provider refused the request because it is at
/// its concurrency limit (carried with status `RESOURCE_EXHAUSTED`). Unlike `closing`,
/// the instance stays in service: our consumers re-send such a request to another
/// instance a bounded number of times (see lossless-rpc-cluster's
/// `FailureKind::Overloaded`).
pub const NOT_EXECUTED_OVERLOADED: HeaderValue = HeaderValue::from_static("overloaded");

/// A [`GRPC_TIMEOUT`] value that is not 1 to 8 digits and a unit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed grpc-timeout `{0}` (expected 1 to 8 digits and one of H M S m u n)")]
pub struct MalformedTimeout(pub String);

/// The caller's deadline from the [`GRPC_TIMEOUT`] header, read strictly.
///
/// gRPC over HTTP/2 ("Requests") defines the value as at most 8 ASCII digits followed
/// by one unit: `H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u`
/// microseconds, `n` nanoseconds; `500m` is half a second. Providers answer a malformed
/// value with `INTERNAL`, as grpc-go's server does (the spec names no status for it),
/// rather than ignore a deadline the caller believes it set.
///
/// # Errors
/// [`MalformedTimeout`] when the header is present but not a valid timeout.
pub fn read_grpc_timeout(headers: &HeaderMap) -> Result<Option<Duration>, MalformedTimeout> {
    let Some(value) = header(headers, &GRPC_TIMEOUT) else {
        return Ok(None);
    };
    let malformed = || MalformedTimeout(String::from_utf8_lossy(value.as_bytes()).into_owned());
    let Some((&unit, digits)) = value.as_bytes().split_last() else {
        return Err(malformed());
    };
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(malformed());
    }
    // At most 8 digits: always fits, and never overflows below.
    let amount = digits
        .iter()
        .fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0'));
    Ok(Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return Err(malformed()),
    }))
}

/// The caller's deadline from the [`GRPC_TIMEOUT`] header, if it has a valid one
/// ([`read_grpc_timeout`]); `None` when the header is absent or malformed. Consumers read
/// it to bound each attempt by the smaller of the caller's deadline and their own
/// timeout, and the whole call by the caller's deadline.
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    read_grpc_timeout(headers).ok().flatten()
}

/// `limit` as a [`GRPC_TIMEOUT`] value: the finest unit whose amount fits the eight
/// digits gRPC allows (nanoseconds below 0.1 s, microseconds below 100 s, ...),
/// truncated, so the receiver never waits longer than the sender.
pub fn grpc_timeout_value(limit: Duration) -> HeaderValue {
    const MAX: u128 = 99_999_999;
    let nanos = limit.as_nanos();
    let (amount, unit) = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ]
    .into_iter()
    .map(|(per_unit, unit)| (nanos / per_unit, unit))
    .find(|(amount, _)| *amount <= MAX)
    .unwrap_or((MAX, 'H'));
    HeaderValue::try_from(format!("{amount}{unit}")).expect("digits and a unit are a valid header")
}

/// The message of `DEADLINE_EXCEEDED` for a call not made, or not run, because its
/// deadline had no time left: a consumer's call inside a handler whose caller's deadline
/// has passed, or a request that arrives with `grpc-timeout: 0m`.
pub const NO_TIME_LEFT: &str = "the caller's deadline left no time: not executed";

/// The status of a call whose deadline of `limit` (its `grpc-timeout`) passed.
pub fn deadline_exceeded(limit: Duration) -> tonic::Status {
    tonic::Status::deadline_exceeded(format!(
        "the call's deadline ({} ms, grpc-timeout) passed",
        limit.as_millis()
    ))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_written_in_the_finest_unit_that_fits_and_read_back() {
        for (limit, written) in [
            (Duration::from_nanos(0), "0n"),
            (Duration::from_millis(50), "50000000n"),
            (Duration::from_millis(300), "300000u"),
            (Duration::from_secs(3), "3000000u"),
            (Duration::from_secs(250), "250000m"),
            (Duration::from_secs(200_000), "200000S"),
        ] {
            let value = grpc_timeout_value(limit);
            assert_eq!(value, written, "{limit:?}");
            let mut headers = HeaderMap::new();
            headers.insert(GRPC_TIMEOUT, value);
            let read = grpc_timeout(&headers).unwrap();
            assert!(
                read <= limit && limit - read < Duration::from_secs(1),
                "{limit:?}"
            );
        }
        assert_eq!(grpc_timeout_value(Duration::MAX), "99999999H");
    }

    #[test]
    fn a_header_is_found_by_scan_or_lookup_as_by_get() {
        let mut headers = HeaderMap::new();
        assert_eq!(header(&headers, &GRPC_STATUS), None);
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.append(GRPC_STATUS, HeaderValue::from_static("0"));
        headers.append(GRPC_STATUS, HeaderValue::from_static("2"));
        assert_eq!(header(&headers, &GRPC_STATUS), headers.get(&GRPC_STATUS));
        assert_eq!(header(&headers, &GRPC_TIMEOUT), None);
        for n in 0..8 {
            headers.insert(
                HeaderName::try_from(format!("x-{n}")).unwrap(),
                HeaderValue::from(n),
            );
        }
        assert_eq!(header(&headers, &GRPC_STATUS).unwrap(), "0");
        assert_eq!(header(&headers, &GRPC_TIMEOUT), None);
    }

    fn read(value: &str) -> Result<Option<Duration>, MalformedTimeout> {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, value.parse().unwrap());
        read_grpc_timeout(&headers)
    }

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

    #[test]
    fn every_unit_and_the_longest_value_are_read() {
        assert_eq!(read_grpc_timeout(&HeaderMap::new()), Ok(None));
        assert_eq!(read("1000u"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(read("2M"), Ok(Some(Duration::from_secs(120))));
        assert_eq!(
            read("99999999H"),
            Ok(Some(Duration::from_secs(99_999_999 * 3600)))
        );
        assert_eq!(read("7n"), Ok(Some(Duration::from_nanos(7))));
    }

    #[test]
    fn malformed_values_are_errors() {
        for value in [
            "",
            "S",
            "10",
            "10s",
            "123456789m",
            "-5S",
            "1.5S",
            " 5S",
            "5 S",
        ] {
            assert!(read(value).is_err(), "{value:?}");
        }
    }
}
