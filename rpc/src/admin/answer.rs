//! The two shapes every admin answer takes: one line of text (probes, refusals,
//! errors) or a JSON document (status, what a change changed).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `status` with `text` as its body: one line, newline-terminated, `text/plain`.
/// Line breaks inside `text` become spaces, so a reason is always one line.
pub(crate) fn line(status: StatusCode, text: impl AsRef<str>) -> Response {
    let mut body = text.as_ref().replace(['\r', '\n'], " ");
    body.push('\n');
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// `status` with `value` as a JSON body (pretty-printed: people read it with curl).
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_string_pretty(value) {
        Ok(mut body) => {
            body.push('\n');
            (
                status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response()
        }
        Err(error) => line(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the answer as JSON: {error}"),
        ),
    }
}
