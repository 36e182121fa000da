//! What the cases send: the sizes and texts the test descriptions fix, and the request
//! messages built from them.

use bytes::Bytes;
use proto::interop::{Payload, ResponseParameters, SimpleRequest, StreamingOutputCallRequest};

/// Request and response sizes of the large and streaming cases, in bytes.
pub(super) const LARGE_REQUEST: usize = 271_828;
pub(super) const LARGE_RESPONSE: i32 = 314_159;
pub(super) const REQUEST_SIZES: [usize; 4] = [27_182, 8, 1_828, 45_904];
pub(super) const RESPONSE_SIZES: [i32; 4] = [31_415, 9, 2_653, 58_979];
pub(super) const STATUS_MESSAGE: &str = "test status message";
pub(super) const SPECIAL_STATUS_MESSAGE: &str =
    "\t\ntest with whitespace\r\nand Unicode BMP \u{263A} and non-BMP \u{1F608}\t\n";
pub(super) const INITIAL_VALUE: &str = "test_initial_metadata_value";
pub(super) const TRAILING_VALUE: [u8; 3] = [0xab, 0xab, 0xab];

pub(super) fn large_request() -> SimpleRequest {
    SimpleRequest {
        response_size: LARGE_RESPONSE,
        payload: Some(zeros(LARGE_REQUEST)),
        ..SimpleRequest::default()
    }
}

pub(super) fn ping(request_size: usize, response_size: i32) -> StreamingOutputCallRequest {
    StreamingOutputCallRequest {
        response_parameters: vec![parameters(response_size)],
        payload: Some(zeros(request_size)),
        ..StreamingOutputCallRequest::default()
    }
}

pub(super) fn parameters(size: i32) -> ResponseParameters {
    ResponseParameters {
        size,
        ..ResponseParameters::default()
    }
}

pub(super) fn zeros(size: usize) -> Payload {
    Payload {
        r#type: 0,
        body: Bytes::from(vec![0u8; size]),
    }
}
