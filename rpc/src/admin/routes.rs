//! The admin endpoint's routes, read as its list of endpoints. Reading is GET, changing
//! state is POST (and needs the token when one is set); an unknown path is 404, a wrong
//! method 405, each with a one-line body.

use axum::Router;
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};

use super::state::AdminState;
use super::{answer, metrics, page, probes, shutdown, status, traffic, upgrade};

/// The endpoints that change state (POST); every other one only reads (GET).
const CHANGING: [&str; 4] = ["/offline", "/online", "/shutdown", "/upgrade"];

/// Every endpoint, with the handler that answers it.
pub(crate) fn router(state: AdminState) -> Router {
    Router::new()
        // Reading: probes, status, the page.
        .route("/", get(page::page))
        .route("/live", get(probes::live))
        .route("/startup", get(probes::startup))
        .route("/ready", get(probes::ready))
        .route("/status", get(status::status))
        .route("/metrics", get(metrics::metrics))
        // Changing state (CHANGING): POST only, with the token when one is set.
        .route("/offline", post(traffic::offline))
        .route("/online", post(traffic::online))
        .route("/shutdown", post(shutdown::shutdown))
        .route("/upgrade", post(upgrade::upgrade))
        // After the routes: it applies to those added before it.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .with_state(state)
}

async fn not_found(uri: Uri) -> Response {
    answer::line(
        StatusCode::NOT_FOUND,
        format!(
            "no such endpoint: {}; try /, /status, /metrics, /live, /startup, /ready, POST /offline, POST /online, POST /shutdown, POST /upgrade",
            uri.path()
        ),
    )
}

/// A wrong method on an endpoint; the hint comes from the endpoint, not the method (a
/// PUT on `/upgrade` is told to use POST).
async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let hint = if CHANGING.contains(&uri.path()) {
        "it changes state: use POST"
    } else {
        "it only reads: use GET"
    };
    answer::line(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} {} is not allowed: {hint}", uri.path()),
    )
}
