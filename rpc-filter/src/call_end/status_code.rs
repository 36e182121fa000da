//! Where a gRPC call's status code is found: response headers, trailers, errors.

use http::{HeaderMap, Response, StatusCode};
use rpc_core::BoxError;
use rpc_core::metadata::{self, GRPC_STATUS};
use tonic::Code;

/// The status code in `headers` (a trailers-only response's headers, or trailers).
pub fn code_in_headers(headers: &HeaderMap) -> Option<Code> {
    metadata::header(headers, &GRPC_STATUS).map(|value| Code::from_bytes(value.as_bytes()))
}

/// The status of a call known from its response headers alone: the `grpc-status` of a
/// trailers-only response, or, for an HTTP error without one, the code gRPC maps that
/// HTTP status to ([gRPC's HTTP to gRPC status mapping][mapping]). `None` when the
/// status will come in the trailers.
///
/// [mapping]: https://github.com/grpc/grpc/blob/master/doc/http-grpc-status-mapping.md
pub fn code_in_response<B>(response: &Response<B>) -> Option<Code> {
    if let Some(code) = code_in_headers(response.headers()) {
        return Some(code);
    }
    Some(match response.status() {
        StatusCode::OK => return None,
        StatusCode::BAD_REQUEST => Code::Internal,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND => Code::Unimplemented,
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Code::Unavailable,
        _ => Code::Unknown,
    })
}

/// The status code a service's error stands for, when a call fails without a response.
pub trait StatusOfError {
    /// The code the caller sees for this error.
    fn status_code(&self) -> Code;
}

impl StatusOfError for BoxError {
    /// The code of a `tonic::Status` (what the cluster returns), else `UNKNOWN`.
    fn status_code(&self) -> Code {
        self.downcast_ref::<tonic::Status>()
            .map_or(Code::Unknown, tonic::Status::code)
    }
}

impl StatusOfError for tonic::Status {
    fn status_code(&self) -> Code {
        self.code()
    }
}

impl StatusOfError for std::convert::Infallible {
    fn status_code(&self) -> Code {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_comes_from_headers_or_the_http_status() {
        let trailers_only = tonic::Status::not_found("x").into_http::<()>();
        assert_eq!(code_in_response(&trailers_only), Some(Code::NotFound));
        assert_eq!(code_in_response(&Response::new(())), None);
        let mut unavailable = Response::new(());
        *unavailable.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(code_in_response(&unavailable), Some(Code::Unavailable));
    }

    #[test]
    fn errors_give_their_status_or_unknown() {
        let status: BoxError = Box::new(tonic::Status::deadline_exceeded("late"));
        assert_eq!(status.status_code(), Code::DeadlineExceeded);
        let other: BoxError = "broken".into();
        assert_eq!(other.status_code(), Code::Unknown);
    }
}
