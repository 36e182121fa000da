//! `POST /upgrade`: runs a hot upgrade — the same one SIGUSR2 starts — and answers when
//! its outcome is decided, with its report as JSON ([`UpgradeView`], durations in
//! milliseconds): 200 when the new process took over (this one then drains and exits),
//! 409 when it was refused (the upgrade turned off with `upgrade.enabled: false`,
//! another upgrade under way, the previous generation still draining, shutting down: the
//! reason is in `reason`, the kind in `refusal`), 500 when it failed (the new
//! binary's check or start failed; `reason` holds its own message and this process
//! serves on, untouched).
//!
//! The answer comes from the old process, which keeps its admin endpoint open until
//! step 6 of its drain; the new process already answers on the same (inherited) port,
//! and its `GET /status` shows its own `pid`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use rpc_lifecycle::{Refusal, StepOutcome, StepReport, UpgradeReport, UpgradeResult, UpgradeStep};
use serde::Serialize;

use super::answer;
use super::auth::Authorized;
use super::no_body::NoBody;
use super::no_parameters::NoParameters;
use super::state::AdminState;

/// An upgrade's report as the admin endpoint shows it. Durations are milliseconds.
#[derive(Serialize)]
pub(crate) struct UpgradeView {
    result: UpgradeResult,
    reason: Option<String>,
    refusal: Option<Refusal>,
    new_pid: Option<u32>,
    /// From the start of the new process to its `ready`.
    time_to_ready_ms: Option<f64>,
    steps: Vec<UpgradeStepView>,
    /// From the trigger to the end of the last step taken.
    total_ms: f64,
}

/// One step of an upgrade, as the admin endpoint shows it.
#[derive(Serialize)]
pub(crate) struct UpgradeStepView {
    step: UpgradeStep,
    duration_ms: f64,
    outcome: StepOutcome,
}

impl UpgradeStepView {
    pub(crate) fn of(step: &StepReport<UpgradeStep>) -> Self {
        Self {
            step: step.step,
            duration_ms: step.duration.as_secs_f64() * 1e3,
            outcome: step.outcome,
        }
    }
}

impl UpgradeView {
    pub(crate) fn of(report: &UpgradeReport) -> Self {
        Self {
            result: report.result,
            reason: report.reason.clone(),
            refusal: report.refusal,
            new_pid: report.new_pid,
            time_to_ready_ms: report.time_to_ready.map(|d| d.as_secs_f64() * 1e3),
            steps: report.steps.iter().map(UpgradeStepView::of).collect(),
            total_ms: report.total.as_secs_f64() * 1e3,
        }
    }
}

/// `POST /upgrade`: the upgrade's report, once decided; 400, and no upgrade, when the
/// query string holds a parameter (it takes none).
pub(crate) async fn upgrade(
    _: Authorized,
    _: NoBody,
    State(state): State<AdminState>,
    _: NoParameters,
) -> Response {
    let report = state.lifecycle.upgrade().await;
    let status = match report.result {
        UpgradeResult::Succeeded => StatusCode::OK,
        // Cut short by the shutdown: like a refusal, the state of this process is the
        // reason, not the new build.
        UpgradeResult::Refused | UpgradeResult::Cancelled => StatusCode::CONFLICT,
        UpgradeResult::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    };
    answer::json(status, &UpgradeView::of(&report))
}
