//! Bad input on the wire, for the tests and the benchmark of what a provider does with
//! it: HTTP/2 written by hand (`frames`), one gRPC call with any headers and body bytes
//! (`grpc`), and the attacks of issue 12's rule 5 (`attacks`): bytes that are not
//! HTTP/2, malformed frames, the rapid-reset, header-list and CONTINUATION floods.

mod attacks;
mod frames;
pub mod grpc;

pub use attacks::{
    FloodAnswer, Malformed, RapidReset, continuation_flood, large_header_list, not_http2,
    rapid_reset,
};
pub use frames::{Answer, END_HEADERS, Frame, GoAway, PREFACE, kind, send_raw, valid_start};
