//! `GET /`: the status page a person reads. One HTML file (`page.html`) with its style
//! and script inline and no external asset, so it works on a host without internet
//! access; its script draws `GET /status` and refreshes itself every second.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The page, compiled into the binary.
const PAGE: &str = include_str!("page.html");

/// `GET /`.
pub(crate) async fn page() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            // What the page shows changes every second; its script fetches afresh.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        PAGE,
    )
        .into_response()
}
