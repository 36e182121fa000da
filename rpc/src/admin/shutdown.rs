//! `POST /shutdown`: starts the graceful sequence — the same one SIGTERM runs — and
//! answers at once; the sequence goes on in its own task. The admin endpoint keeps
//! answering (`/ready` says 503) until it closes in step 6.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use rpc_core::Phase;

use super::answer;
use super::auth::Authorized;
use super::no_body::NoBody;
use super::no_parameters::NoParameters;
use super::state::AdminState;

/// `POST /shutdown`: 202, with the phase the sequence starts from; 400, and no
/// shutdown, when the query string holds a parameter (it takes none).
pub(crate) async fn shutdown(
    _: Authorized,
    _: NoBody,
    State(state): State<AdminState>,
    _: NoParameters,
) -> Response {
    let phase = state.lifecycle.phase();
    // The sequence runs in its own task (see `Lifecycle::before_shutdown`): the future
    // only awaits its report, and is not needed here.
    drop(state.lifecycle.before_shutdown());
    let text = match phase {
        Phase::Serving => "graceful shutdown started".to_owned(),
        phase if phase < Phase::Serving => {
            format!("start-up interrupted: shutdown requested (phase {phase})")
        }
        phase => format!("graceful shutdown already under way (phase {phase})"),
    };
    answer::line(StatusCode::ACCEPTED, text)
}
