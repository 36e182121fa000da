//! `GET /live`, `/startup`, `/ready`: 200 or 503 with the lifecycle's one-line reason
//! (see [`Lifecycle::probe`](rpc_lifecycle::Lifecycle::probe) for what each means).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use rpc_lifecycle::Probe;

use super::answer;
use super::state::AdminState;

/// `GET /live`: the process answers (never tied to the registry).
pub(crate) async fn live(State(state): State<AdminState>) -> Response {
    probe(&state, Probe::Live)
}

/// `GET /startup`: start-up finished.
pub(crate) async fn startup(State(state): State<AdminState>) -> Response {
    probe(&state, Probe::Startup)
}

/// `GET /ready`: serving and online.
pub(crate) async fn ready(State(state): State<AdminState>) -> Response {
    probe(&state, Probe::Ready)
}

fn probe(state: &AdminState, probe: Probe) -> Response {
    let answer = state.lifecycle.probe(probe);
    let status = if answer.passed {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    answer::line(status, answer.reason)
}
