//! `GET /metrics`: the application's Prometheus metrics, as
//! [`Metrics::encode`](crate::Metrics::encode) writes them (docs/observability.md lists
//! every metric). 404 with a one-line reason when `metrics.enabled` is false, so a
//! scrape of an instance without metrics shows as a failed target, not as an empty one.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::answer;
use super::state::AdminState;
use crate::Metrics;

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AdminState>) -> Response {
    if !state.metrics.is_enabled() {
        return answer::line(
            StatusCode::NOT_FOUND,
            "metrics are off: set metrics.enabled: true",
        );
    }
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(Metrics::CONTENT_TYPE),
        )],
        state.metrics.encode(),
    )
        .into_response()
}
