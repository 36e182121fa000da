//! The last stop's figures, for a Prometheus that never scraped the process that
//! stopped.
//!
//! A shutdown takes seconds and the process exits right after it; a scrape every 15-30 s
//! rarely sees its step gauges. With `metrics.last_stop_file` set, each process writes
//! its shutdown report there when the sequence ends (also a hot upgrade's old process,
//! after its drain), and every process reads the file at each scrape and exports it as
//! `rpc_last_stop_*`: the next start under systemd, and a hot upgrade's new generation —
//! which reads its predecessor's drain as soon as it is written — show how the last stop
//! went. The file is small (one JSON object), written to a temporary name and renamed,
//! so a scrape never reads half of it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use rpc_lifecycle::{ShutdownReport, StepOutcome};
use serde::{Deserialize, Serialize};

use super::scrape::{NO_LABELS, SECONDS, gauge, gauges};

/// What the file holds.
#[derive(Debug, Serialize, Deserialize)]
struct LastStop {
    /// The application (`application.name`) that stopped.
    application: String,
    /// The pid that stopped.
    pid: u32,
    /// When the sequence ended, in seconds since the epoch.
    ended_at: f64,
    report: ShutdownReport,
}

/// Writes this process's stop to the file, and reads the file back at each scrape.
#[derive(Debug)]
pub(crate) struct LastStopFile {
    path: PathBuf,
    application: String,
}

impl LastStopFile {
    /// The file at `path`, written by the application `application`.
    pub(crate) fn new(path: &Path, application: &str) -> Self {
        Self {
            path: path.to_owned(),
            application: application.to_owned(),
        }
    }

    /// Writes `report` as this process's stop; a failure is logged, never returned: the
    /// stop itself went as the report says.
    pub(crate) fn record(&self, report: &ShutdownReport) {
        let stop = LastStop {
            application: self.application.clone(),
            pid: std::process::id(),
            ended_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64()),
            report: report.clone(),
        };
        if let Err(error) = write_atomically(&self.path, &stop) {
            tracing::warn!(path = %self.path.display(), %error, "the last stop's report could not be written (metrics.last_stop_file)");
        }
    }

    fn read(&self) -> Option<LastStop> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        serde_json::from_str(&text).ok()
    }
}

fn write_atomically(path: &Path, stop: &LastStop) -> std::io::Result<()> {
    let json = serde_json::to_vec(stop).map_err(std::io::Error::other)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    std::fs::write(&temporary, json)?;
    std::fs::rename(&temporary, path)
}

impl Collector for LastStopFile {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(stop) = self.read() else {
            return Ok(());
        };
        let encoder = &mut encoder;
        let report = &stop.report;
        gauges(
            encoder,
            "rpc_last_stop_end_time",
            "When the last stop recorded in metrics.last_stop_file ended, since the epoch.",
            Some(&SECONDS),
            [(
                [
                    ("application", stop.application.as_str()),
                    ("pid", stop.pid.to_string().as_str()),
                ],
                stop.ended_at,
            )],
        )?;
        gauges(
            encoder,
            "rpc_last_stop_duration",
            "How long the last stop's sequence took.",
            Some(&SECONDS),
            [(NO_LABELS, report.total.as_secs_f64())],
        )?;
        gauge(
            encoder,
            "rpc_last_stop_exit_code",
            "The exit code the last stop implied: 0 clean, 1 something was cut, 130/143 a second signal.",
            i64::from(report.exit_code()),
        )?;
        for (name, help, value) in [
            (
                "rpc_last_stop_inbound_left",
                "Inbound requests still in flight when the last stop closed its connections.",
                report.inbound_left,
            ),
            (
                "rpc_last_stop_outbound_left",
                "Outbound calls still in flight when the last stop closed its references.",
                report.outbound_left,
            ),
            (
                "rpc_last_stop_streams_cut",
                "Calls the last stop ended at its drain bound.",
                report.streams_cut,
            ),
            (
                "rpc_last_stop_streams_moved",
                "Streams whose handlers ended them as moved in the last stop (resumed elsewhere).",
                report.streams_moved,
            ),
            (
                "rpc_last_stop_connections_forced",
                "Connections the last stop closed by force with calls on them.",
                report.connections_forced,
            ),
            (
                "rpc_last_stop_refused_streams",
                "Requests of plain clients the last stop refused with REFUSED_STREAM.",
                report.refused_streams,
            ),
        ] {
            gauge(encoder, name, help, value as u64)?;
        }
        gauge(
            encoder,
            "rpc_last_stop_rejected",
            "Requests the last stop refused as closing, not executed (re-sent by rpc consumers).",
            report.rejected,
        )?;
        let durations = report.steps.iter().map(|step| {
            let name = step.step.to_string();
            ([("step", name)], step.duration.as_secs_f64())
        });
        gauges(
            encoder,
            "rpc_last_stop_step_duration",
            "How long each step of the last stop took.",
            Some(&SECONDS),
            durations,
        )?;
        let outcomes = report.steps.iter().flat_map(|step| {
            StepOutcome::ALL.map(|outcome| {
                let labels = [
                    ("step", step.step.to_string()),
                    ("outcome", outcome.to_string()),
                ];
                (labels, u64::from(step.outcome == outcome))
            })
        });
        gauges(
            encoder,
            "rpc_last_stop_step_outcome",
            "1 for how each step of the last stop ended.",
            None,
            outcomes,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rpc_lifecycle::{Step, StepReport};

    use super::super::scrape::encode_one;
    use super::*;

    #[test]
    fn a_recorded_stop_is_exported_until_the_next_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("last-stop.json");
        let file = LastStopFile::new(&path, "demo");
        assert_eq!(
            encode_one(LastStopFile::new(&path, "demo")),
            "",
            "no file, no series"
        );
        let report = ShutdownReport {
            steps: vec![StepReport {
                step: Step::DrainInbound,
                duration: Duration::from_millis(1500),
                outcome: StepOutcome::TimedOut,
            }],
            total: Duration::from_secs(4),
            streams_cut: 2,
            streams_moved: 3,
            ..ShutdownReport::default()
        };
        file.record(&report);
        let text = encode_one(LastStopFile::new(&path, "demo"));
        for line in [
            "rpc_last_stop_duration_seconds 4.0\n",
            "rpc_last_stop_exit_code 1\n",
            "rpc_last_stop_streams_cut 2\n",
            "rpc_last_stop_streams_moved 3\n",
            "rpc_last_stop_step_duration_seconds{step=\"drain-inbound\"} 1.5\n",
            "rpc_last_stop_step_outcome{step=\"drain-inbound\",outcome=\"timed-out\"} 1\n",
            "rpc_last_stop_step_outcome{step=\"drain-inbound\",outcome=\"completed\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(text.contains("application=\"demo\""), "{text}");

        file.record(&ShutdownReport::default());
        let text = encode_one(LastStopFile::new(&path, "demo"));
        assert!(text.contains("rpc_last_stop_exit_code 0\n"), "{text}");
        assert!(!text.contains("drain-inbound"), "{text}");
    }
}
