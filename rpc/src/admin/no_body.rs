//! The body of a request to an endpoint that changes state: it takes none (its options
//! are in the query string), and a body there is a mistake — a JSON `{"service": …}`
//! meant to select one service would otherwise be ignored and the change made to every
//! service. The extractor answers 415 before the handler runs.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::Response;

use super::answer;

/// Extracted when the request declares no body (no `Transfer-Encoding`, no
/// `Content-Length` but 0); otherwise the request gets a one-line 415.
pub(crate) struct NoBody;

impl<S: Send + Sync> FromRequestParts<S> for NoBody {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(sent) = declared_body(parts) else {
            return Ok(NoBody);
        };
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map_or_else(String::new, |value| format!(" of {value}"));
        let path = parts.uri.path();
        let options = match path {
            "/offline" | "/online" => "select services in the query string: ?service=REGEX",
            _ => "it takes no options",
        };
        Err(answer::line(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "{} {path} takes no body ({sent}{content_type} sent): {options}",
                parts.method
            ),
        ))
    }
}

/// What body the request declares, if any: `N bytes`, or `a chunked body`.
fn declared_body(parts: &Parts) -> Option<String> {
    if parts.headers.contains_key(header::TRANSFER_ENCODING) {
        return Some("a chunked body".to_owned());
    }
    let length = parts.headers.get(header::CONTENT_LENGTH)?;
    match length
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
    {
        Some(0) => None,
        Some(bytes) => Some(format!("{bytes} bytes")),
        None => Some("a body of unknown length".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    async fn extract(headers: &[(&str, &str)]) -> Result<(), (StatusCode, String)> {
        let mut request = Request::post("/offline?service=a.B");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (mut parts, ()) = request.body(()).unwrap().into_parts();
        match NoBody::from_request_parts(&mut parts, &()).await {
            Ok(NoBody) => Ok(()),
            Err(response) => {
                let status = response.status();
                let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                    .await
                    .unwrap();
                Err((status, String::from_utf8(body.to_vec()).unwrap()))
            }
        }
    }

    #[tokio::test]
    async fn no_body_or_an_empty_one_passes() {
        assert_eq!(extract(&[]).await, Ok(()));
        assert_eq!(extract(&[("content-length", "0")]).await, Ok(()));
        // curl -X POST -H 'Content-Type: application/json' with no data: nothing to ignore.
        let json = ("content-type", "application/json");
        assert_eq!(extract(&[json, ("content-length", "0")]).await, Ok(()));
    }

    #[tokio::test]
    async fn a_body_of_any_type_is_refused_naming_the_query_string() {
        let json = [
            ("content-type", "application/json"),
            ("content-length", "18"),
        ];
        let (status, line) = extract(&json).await.unwrap_err();
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(
            line.contains("POST /offline takes no body (18 bytes of application/json sent)"),
            "{line}"
        );
        assert!(line.contains("?service=REGEX"), "{line}");
        let chunked = [("transfer-encoding", "chunked")];
        let (status, line) = extract(&chunked).await.unwrap_err();
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(line.contains("a chunked body"), "{line}");
        let untyped = [("content-length", "5")];
        assert!(extract(&untyped).await.is_err());
        let nonsense = [("content-length", "five")];
        assert!(extract(&nonsense).await.is_err());
    }
}
