//! A request that is not gRPC, answered as the gRPC protocol asks: HTTP 415.
//!
//! gRPC's HTTP/2 protocol: "If Content-Type does not begin with `application/grpc`,
//! gRPC servers SHOULD respond with HTTP status of 415 (Unsupported Media Type). This
//! will prevent other HTTP/2 clients from interpreting a gRPC error response, which
//! uses status 200 (OK), as successful." tonic answers such a request 200 with
//! `grpc-status: INTERNAL`, which a plain HTTP client (curl, a proxy's health check)
//! reads as success. `application/grpc+proto`, `application/grpc+json` and the like,
//! which Triple and grpc-web peers send, begin with it and are served.

use http::header::CONTENT_TYPE;
use http::{HeaderMap, Response, StatusCode};

/// Whether `headers` say gRPC: a `content-type` that begins with `application/grpc`
/// (ASCII case ignored, as media types are).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    headers.get(CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.len() >= GRPC.len() && value[..GRPC.len()].eq_ignore_ascii_case(GRPC)
    })
}

/// The answer to a request that is not gRPC: 415, with no body, naming what is served.
pub(crate) fn unsupported<B>(ended: B) -> Response<B> {
    let mut response = Response::new(ended);
    *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
    response.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(content_type: Option<&'static str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = content_type {
            headers.insert(CONTENT_TYPE, http::HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn grpc_and_its_subtypes_are_grpc_and_nothing_else_is() {
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
            "Application/GRPC",
        ] {
            assert!(is_grpc(&with(Some(grpc))), "{grpc}");
        }
        for other in ["text/plain", "application/json", "application/grp", ""] {
            assert!(!is_grpc(&with(Some(other))), "{other}");
        }
        assert!(!is_grpc(&with(None)), "no content-type");
    }
}
