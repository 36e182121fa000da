//! Reading a request's `grpc-timeout` header, strictly.
//!
//! gRPC over HTTP/2 ("Requests") defines the value as at most 8 ASCII digits followed
//! by one unit: `H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds,
//! `n` nanoseconds. The spec names no status for a value that is not that; we answer
//! `INTERNAL`, as grpc-go's server does ("malformed grpc-timeout"), rather than ignore a
//! deadline the caller believes it set.

use std::time::Duration;

use http::HeaderMap;
use tonic::Status;

use crate::metadata::GRPC_TIMEOUT;

/// A `grpc-timeout` value that is not 1 to 8 digits and a unit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed grpc-timeout `{0}` (expected 1 to 8 digits and one of H M S m u n)")]
pub struct MalformedTimeout(pub String);

/// The caller's deadline, from now, if the request carries one.
///
/// # Errors
/// [`MalformedTimeout`] when the header is present but not a valid timeout.
pub fn grpc_timeout(headers: &HeaderMap) -> Result<Option<Duration>, MalformedTimeout> {
    let Some(value) = headers.get(&GRPC_TIMEOUT) else {
        return Ok(None);
    };
    let malformed = || MalformedTimeout(String::from_utf8_lossy(value.as_bytes()).into_owned());
    let bytes = value.as_bytes();
    let Some((&unit, digits)) = bytes.split_last() else {
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

/// The status of a call whose deadline of `limit` (its `grpc-timeout`) passed.
pub fn deadline_exceeded(limit: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "the call's deadline ({} ms, grpc-timeout) passed",
        limit.as_millis()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<Option<Duration>, MalformedTimeout> {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, value.parse().unwrap());
        grpc_timeout(&headers)
    }

    #[test]
    fn valid_values_and_every_unit() {
        assert_eq!(grpc_timeout(&HeaderMap::new()), Ok(None));
        assert_eq!(parse("1000u"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(parse("250m"), Ok(Some(Duration::from_millis(250))));
        assert_eq!(parse("3S"), Ok(Some(Duration::from_secs(3))));
        assert_eq!(parse("2M"), Ok(Some(Duration::from_secs(120))));
        assert_eq!(
            parse("99999999H"),
            Ok(Some(Duration::from_secs(99_999_999 * 3600)))
        );
        assert_eq!(parse("7n"), Ok(Some(Duration::from_nanos(7))));
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
            assert!(parse(value).is_err(), "{value:?}");
        }
    }
}
