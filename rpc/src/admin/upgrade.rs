//! `POST /upgrade`: runs a hot upgrade — the same one SIGUSR2 starts — and answers when
//! its outcome is decided, with the [`UpgradeReport`](rpc_core::lifecycle::UpgradeReport)
//! as JSON: 200 when the new process took over (this one then drains and exits), 409
//! when it was refused (another upgrade under way, the previous generation still
//! draining, shutting down: the reason is in `reason`), 500 when it failed (the new
//! binary's check or start failed; `reason` holds its own message and this process
//! serves on, untouched).
//!
//! The answer comes from the old process, which keeps its admin endpoint open until
//! step 6 of its drain; the new process already answers on the same (inherited) port.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use rpc_core::lifecycle::UpgradeResult;

use super::answer;
use super::auth::Authorized;
use super::state::AdminState;

/// `POST /upgrade`: the upgrade's report, once decided.
pub(crate) async fn upgrade(_: Authorized, State(state): State<AdminState>) -> Response {
    let report = state.lifecycle.upgrade().await;
    let status = match report.result {
        UpgradeResult::Succeeded => StatusCode::OK,
        UpgradeResult::Refused => StatusCode::CONFLICT,
        UpgradeResult::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    };
    answer::json(status, &report)
}
