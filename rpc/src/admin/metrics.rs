//! `GET /metrics`: the application's Prometheus metrics, as
//! [`Metrics::encode`](crate::Metrics::encode) writes them (docs/observability.md lists
//! every metric), or in the OpenMetrics format with exemplars
//! ([`Metrics::encode_openmetrics`](crate::Metrics::encode_openmetrics)) to a scraper
//! whose `Accept` names `application/openmetrics-text`, as Prometheus' does. 404 with a
//! one-line reason when `metrics.enabled` is false, so a scrape of an instance without
//! metrics shows as a failed target, not as an empty one.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::answer;
use super::state::AdminState;
use crate::Metrics;

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    if !state.metrics.is_enabled() {
        return answer::line(
            StatusCode::NOT_FOUND,
            "metrics are off: set metrics.enabled: true",
        );
    }
    let (content_type, text) = if asks_for_openmetrics(&headers) {
        (
            Metrics::OPENMETRICS_CONTENT_TYPE,
            state.metrics.encode_openmetrics(),
        )
    } else {
        (Metrics::CONTENT_TYPE, state.metrics.encode())
    };
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        text,
    )
        .into_response()
}

/// Whether the scraper's `Accept` prefers OpenMetrics' text format (Prometheus sends
/// `application/openmetrics-text;version=1.0.0;q=0.5,…,text/plain;version=0.0.4;q=0.3`):
/// it names it with a weight above 0 and at least that of the Prometheus text format
/// (`text/plain`, `text/*` or `*/*`).
fn asks_for_openmetrics(headers: &HeaderMap) -> bool {
    let (mut openmetrics, mut text) = (0.0_f32, 0.0_f32);
    let ranges = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','));
    for range in ranges {
        let mut parts = range.split(';').map(str::trim);
        let kind = parts.next().unwrap_or("").to_ascii_lowercase();
        let weight = parts
            .filter_map(|parameter| parameter.strip_prefix("q="))
            .find_map(|q| q.parse::<f32>().ok())
            .unwrap_or(1.0);
        match kind.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(weight),
            "text/plain" | "text/*" | "*/*" => text = text.max(weight),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_served_to_a_scraper_that_names_it() {
        let accept = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_static(value));
            asks_for_openmetrics(&headers)
        };
        assert!(accept(
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"
        ));
        assert!(accept("text/plain, Application/OpenMetrics-Text"));
        assert!(!accept("text/plain;version=0.0.4"));
        assert!(!accept("*/*"));
        assert!(!accept("application/openmetrics-text; version=1.0.0; q=0"));
        assert!(!accept(
            "text/plain;q=0.9, application/openmetrics-text;q=0.1"
        ));
        assert!(accept("application/openmetrics-text;q=0.9, */*;q=0.1"));
        assert!(!asks_for_openmetrics(&HeaderMap::new()));
    }
}
