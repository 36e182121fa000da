//! What a hot upgrade did: each step's duration and outcome, the new process's pid, and
//! why it failed or was refused.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::step::{StepReport, UpgradeStep, write_steps};

/// Why an upgrade was not started. One upgrade at a time, and never three generations
/// alive at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// The hot upgrade is turned off (`upgrade.enabled: false`).
    Disabled,
    /// The application is not serving yet (or was never started).
    NotServing,
    /// No upgrade was configured (`Lifecycle::configure_upgrade`).
    NotConfigured,
    /// Another upgrade is under way.
    InProgress,
    /// This process is the new generation and its predecessor is still draining.
    PredecessorDraining,
    /// This process handed over to a successor already: upgrade that one.
    HandedOver,
    /// The shutdown sequence has begun.
    ShuttingDown,
    /// Registrations are being changed — a manual offline or online
    /// (`Lifecycle::offline`, `Lifecycle::online`), or a registration retried after a
    /// registry failure: the upgrade would hand over registrations that are moving.
    TrafficChanging,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Disabled => {
                "the hot upgrade is turned off (upgrade.enabled: false); deploy a new process instead"
            }
            Self::NotServing => "the application is not serving",
            Self::NotConfigured => "no upgrade is configured",
            Self::InProgress => "an upgrade is already under way",
            Self::PredecessorDraining => {
                "the previous generation is still draining (one generation at a time)"
            }
            Self::HandedOver => "this process handed over to its successor already",
            Self::ShuttingDown => "the application is shutting down",
            Self::TrafficChanging => {
                "registrations are being changed (a manual offline or online, or a registration retried); try again once that is done"
            }
        })
    }
}

/// How an upgrade ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpgradeResult {
    /// The new process serves; this one drains and exits.
    Succeeded,
    /// The new process was not started, or killed and reaped; this one goes on serving.
    Failed,
    /// Not started (see [`Refusal`]).
    Refused,
    /// The shutdown began before the new process took over: the new process, if
    /// started, was killed and reaped, and this process shuts down as usual.
    Cancelled,
}

impl UpgradeResult {
    /// Every result, for metrics labels.
    pub const ALL: [UpgradeResult; 4] = [
        Self::Succeeded,
        Self::Failed,
        Self::Refused,
        Self::Cancelled,
    ];
}

impl fmt::Display for UpgradeResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Refused => "refused",
            Self::Cancelled => "cancelled",
        })
    }
}

/// The result of one hot upgrade, as the trigger (the admin endpoint, a log line) sees
/// it: returned when the outcome is decided (the new process took over, or the upgrade
/// failed); the old process's drain and exit then go on, and its final report (all
/// seven steps) is logged when it exits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeReport {
    /// How it ended.
    pub result: UpgradeResult,
    /// Why it failed or was refused: for a failed start, with the tail of the new
    /// process's standard error.
    pub reason: Option<String>,
    /// The refusal, when refused.
    pub refusal: Option<Refusal>,
    /// The new process, once started.
    pub new_pid: Option<u32>,
    /// From the start of the new process to its `ready`.
    pub time_to_ready: Option<Duration>,
    /// The steps taken so far, in order.
    pub steps: Vec<StepReport<UpgradeStep>>,
    /// From the trigger to the end of the last step taken.
    pub total: Duration,
}

impl UpgradeReport {
    /// A report of a refused trigger.
    pub(crate) fn refused(refusal: Refusal) -> Self {
        Self {
            result: UpgradeResult::Refused,
            reason: Some(refusal.to_string()),
            refusal: Some(refusal),
            new_pid: None,
            time_to_ready: None,
            steps: Vec::new(),
            total: Duration::ZERO,
        }
    }

    /// Whether the new process took over.
    pub fn succeeded(&self) -> bool {
        self.result == UpgradeResult::Succeeded
    }

    /// The report of `step`, if it ran.
    pub fn step(&self, step: UpgradeStep) -> Option<&StepReport<UpgradeStep>> {
        self.steps.iter().find(|s| s.step == step)
    }
}

impl fmt::Display for UpgradeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {} ms:", self.result, self.total.as_millis())?;
        write_steps(f, &self.steps)?;
        if let Some(pid) = self.new_pid {
            write!(f, "; new pid {pid}")?;
        }
        if let Some(ready) = self.time_to_ready {
            write!(f, ", ready after {} ms", ready.as_millis())?;
        }
        if let Some(reason) = &self.reason {
            write!(f, "; {reason}")?;
        }
        Ok(())
    }
}
