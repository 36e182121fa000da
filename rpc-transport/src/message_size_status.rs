//! The status of a message over the size limit: `RESOURCE_EXHAUSTED`, as gRPC's status
//! code list says ("sent or received message was larger than configured limit") and as
//! the C++, Java and Go implementations answer (grpc/grpc#10612). tonic answers
//! `OUT_OF_RANGE` instead, which a client reads as a bad argument; we rewrite that one
//! status, recognised by tonic's message, on its way out of the provider. Delete this
//! file once tonic uses `RESOURCE_EXHAUSTED`.

use http::HeaderMap;
use tonic::{Code, Status};

use rpc_core::metadata::{self, GRPC_STATUS};

/// The start of tonic's messages for a message over the decoding or encoding limit.
const TONIC_TOO_LARGE: [&str; 2] = [
    "Error, decoded message length too large",
    "Error, encoded message length too large",
];

/// Rewrites tonic's `OUT_OF_RANGE` "message length too large" status in `headers` (the
/// headers of a trailers-only response, or trailers) to `RESOURCE_EXHAUSTED`, keeping
/// the message. Any other status is left alone; so is the common case, no status.
pub(crate) fn correct(headers: &mut HeaderMap) {
    // The status code `11` (OUT_OF_RANGE) alone is a cheap test; the message is decoded
    // only then. Every response passes here: the name is pre-parsed (parsing a `&str`
    // key on each lookup cost about 300 instructions per response) and found by a scan
    // (`metadata::header`).
    if metadata::header(headers, &GRPC_STATUS).map(|v| v.as_bytes()) != Some(b"11") {
        return;
    }
    let Some(status) = Status::from_header_map(headers) else {
        return;
    };
    if status.code() != Code::OutOfRange
        || !TONIC_TOO_LARGE
            .iter()
            .any(|prefix| status.message().starts_with(prefix))
    {
        return;
    }
    let corrected = Status::resource_exhausted(status.message());
    // Encoding a message tonic itself produced cannot fail; if it did, the code alone
    // is still right.
    if corrected.add_header(headers).is_err() {
        headers.insert(GRPC_STATUS, http::HeaderValue::from_static("8"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_of(status: &Status) -> HeaderMap {
        let mut headers = HeaderMap::new();
        status.add_header(&mut headers).unwrap();
        headers
    }

    #[test]
    fn tonics_size_limit_status_becomes_resource_exhausted() {
        let message = "Error, decoded message length too large: found 5242880 bytes, the limit is: 4194304 bytes";
        let mut headers = headers_of(&Status::out_of_range(message));
        correct(&mut headers);
        let status = Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.message(), message);
    }

    #[test]
    fn other_statuses_are_left_alone() {
        for status in [
            Status::out_of_range("page 7 of 3"),
            Status::internal("Error, decoded message length too large"),
            Status::ok(""),
        ] {
            let mut headers = headers_of(&status);
            let before = headers.clone();
            correct(&mut headers);
            assert_eq!(headers, before);
        }
        let mut empty = HeaderMap::new();
        correct(&mut empty);
        assert!(empty.is_empty());
    }
}
