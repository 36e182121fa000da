//! The admin endpoint's routes, read as its list of endpoints. Reading is GET, changing
//! state is POST (and needs the token when one is set); an unknown path is 404, a wrong
//! method 405, each with a one-line body. In front of them all but the probes, the
//! browser rules (`browser/`): what a web page sends is refused before any handler runs.

use axum::Router;
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};

use super::browser::{self, BrowserGuard};
use super::state::AdminState;
use super::{answer, metrics, page, probes, shutdown, status, traffic, upgrade};

/// The endpoints that change state (POST); every other one only reads (GET).
const CHANGING: &[&str] = &["/offline", "/online", "/shutdown", "/upgrade"];

/// The probes, which the browser rules leave alone: kubelets and load balancers call
/// them with any `Host` and headers.
const PROBES: &[&str] = &["/live", "/ready", "/startup"];

/// Every endpoint, with the handler that answers it.
pub(crate) fn router(state: AdminState) -> Router {
    let guard = BrowserGuard::new(
        state.allowed_hosts.clone(),
        PROBES,
        CHANGING,
        state.refusals.clone(),
    );
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
        // Last: it wraps every route and both fallbacks.
        .layer(axum::middleware::from_fn_with_state(
            guard,
            browser::refuse_forgeries,
        ))
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use rpc_core::Phase;
    use rpc_lifecycle::{Lifecycle, ShutdownConfig};
    use tower::ServiceExt;

    use super::*;
    use crate::Metrics;

    fn state() -> AdminState {
        let mut config = ShutdownConfig::default();
        config.internal_signal = false;
        AdminState::new(
            Lifecycle::new("browser", config),
            Vec::new(),
            Metrics::disabled(),
            None,
        )
    }

    async fn send(
        state: &AdminState,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Response {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        router(state.clone())
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    const HOST: (&str, &str) = ("host", "127.0.0.1:22222");

    /// A page's forged POST never reaches the handler: nothing changes, nothing opens
    /// the door to a preflight, every route and fallback is guarded, the probes are not.
    #[tokio::test]
    async fn a_refused_request_never_reaches_its_handler() {
        let state = state();
        let page = [
            HOST,
            ("origin", "http://evil.example"),
            ("content-type", "text/plain"),
            ("sec-fetch-mode", "no-cors"),
        ];
        for path in CHANGING {
            let answer = send(&state, "POST", path, &page).await;
            assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{path}");
        }
        let no_cors = [
            HOST,
            ("sec-fetch-mode", "no-cors"),
            ("sec-fetch-site", "cross-site"),
        ];
        assert_eq!(
            send(&state, "POST", "/shutdown", &no_cors).await.status(),
            StatusCode::FORBIDDEN
        );
        let text = [HOST, ("content-type", "text/plain;charset=UTF-8")];
        assert_eq!(
            send(&state, "POST", "/shutdown", &text).await.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(
            state.lifecycle.phase(),
            Phase::Created,
            "no shutdown started"
        );

        for headers in [
            &[
                HOST,
                ("origin", "http://evil.example"),
                ("access-control-request-method", "POST"),
            ][..],
            &[HOST],
        ] {
            let preflight = send(&state, "OPTIONS", "/offline", headers).await;
            assert!(preflight.status().is_client_error(), "{headers:?}");
            assert!(
                !preflight
                    .headers()
                    .keys()
                    .any(|name| name.as_str().starts_with("access-control-")),
                "never a CORS grant: {:?}",
                preflight.headers()
            );
        }
        let rebound = [("host", "rebind.example:22222")];
        assert_eq!(
            send(&state, "GET", "/nope", &rebound).await.status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            send(&state, "GET", "/status", &rebound).await.status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            send(&state, "GET", "/live", &rebound).await.status(),
            StatusCode::OK
        );

        let counts = state.refusals.counts();
        assert_eq!(counts.foreign_origin, 5, "{counts:?}");
        assert_eq!(
            (
                counts.browser_post,
                counts.simple_content_type,
                counts.foreign_host
            ),
            (1, 1, 2)
        );
    }

    /// What a client that is no page sends — curl's plain POST, or a page of this
    /// endpoint with `X-Rpc-Admin` — reaches the handler.
    #[tokio::test]
    async fn curl_and_a_proven_same_origin_post_reach_the_handler() {
        let state = state();
        let curl = [HOST, ("user-agent", "curl/8.5.0"), ("accept", "*/*")];
        let answer = send(&state, "POST", "/offline", &curl).await;
        assert_eq!(
            answer.status(),
            StatusCode::CONFLICT,
            "the handler answered: offline during start-up"
        );
        let proven = [
            HOST,
            ("origin", "http://127.0.0.1:22222"),
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-mode", "cors"),
            ("x-rpc-admin", "1"),
        ];
        let answer = send(&state, "POST", "/shutdown", &proven).await;
        assert_eq!(answer.status(), StatusCode::ACCEPTED);
        assert_eq!(state.refusals.counts(), Default::default());
    }
}
