//! What the summary records of one restart of one instance: when, how long its stop
//! took, what its shutdown report said (in milliseconds), and what replaced it.

use std::time::Duration;

use lossless_rpc::ShutdownReport;
use serde::Serialize;

use super::options::RollingError;

/// One restart of one instance.
#[derive(Clone, Debug, Serialize)]
pub struct RestartRecord {
    /// `proxy-2`, `provider-0`, ...
    pub instance: String,
    /// Seconds after the load started.
    pub at_s: f64,
    /// How long stopping the old instance took, in ms.
    pub stop_ms: f64,
    /// The old instance's shutdown report (none after a kill); durations in the JSON
    /// are in ms like every other time of the summary.
    #[serde(serialize_with = "report_in_ms")]
    pub report: Option<ShutdownReport>,
    /// Address of the replacement, empty if it failed to start.
    pub replacement: String,
    /// Why the replacement could not start, if it could not.
    pub error: Option<String>,
}

/// A shutdown report as the JSON summary shows it: each duration as `*_ms`.
#[derive(Serialize)]
struct ReportMs<'a> {
    steps: Vec<StepMs>,
    total_ms: f64,
    rejected: u64,
    refused_streams: usize,
    inbound_left: usize,
    outbound_left: usize,
    unregister_failures: usize,
    connections_closed: usize,
    connections_idle: usize,
    connections_forced: usize,
    streams_cut: usize,
    streams_moved: usize,
    callbacks_failed: usize,
    interrupted_by: &'a Option<lossless_rpc::lifecycle::Interrupt>,
    forced: bool,
}

#[derive(Serialize)]
struct StepMs {
    step: lossless_rpc::lifecycle::Step,
    duration_ms: f64,
    outcome: lossless_rpc::lifecycle::StepOutcome,
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn report_in_ms<S: serde::Serializer>(
    report: &Option<ShutdownReport>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    report
        .as_ref()
        .map(|report| ReportMs {
            steps: report
                .steps
                .iter()
                .map(|step| StepMs {
                    step: step.step,
                    duration_ms: ms(step.duration),
                    outcome: step.outcome,
                })
                .collect(),
            total_ms: ms(report.total),
            rejected: report.rejected,
            refused_streams: report.refused_streams,
            inbound_left: report.inbound_left,
            outbound_left: report.outbound_left,
            unregister_failures: report.unregister_failures,
            connections_closed: report.connections_closed,
            connections_idle: report.connections_idle,
            connections_forced: report.connections_forced,
            streams_cut: report.streams_cut,
            streams_moved: report.streams_moved,
            callbacks_failed: report.callbacks_failed,
            interrupted_by: &report.interrupted_by,
            forced: report.forced(),
        })
        .serialize(serializer)
}

impl RestartRecord {
    pub(crate) fn new(
        instance: &str,
        at: Duration,
        stop_ms: f64,
        report: Option<ShutdownReport>,
        replacement: String,
    ) -> Self {
        Self {
            instance: instance.to_owned(),
            at_s: at.as_secs_f64(),
            stop_ms,
            report,
            replacement,
            error: None,
        }
    }

    pub(crate) fn failed(
        instance: &str,
        at: Duration,
        stop_ms: f64,
        report: Option<ShutdownReport>,
        error: &RollingError,
    ) -> Self {
        Self {
            error: Some(error.to_string()),
            ..Self::new(instance, at, stop_ms, report, String::new())
        }
    }
}
