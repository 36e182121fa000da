//! Metrics of the lifecycle, read from it at scrape time: the phase, the last shutdown's
//! steps, the registrations.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use rpc_core::Phase;
use rpc_lifecycle::Lifecycle;
use rpc_lifecycle::{StepOutcome, UpgradeResult};

use super::scrape::{SECONDS, counters, gauge, gauges};

/// Writes, on each scrape:
/// - `rpc_lifecycle_phase{phase}`: 1 for the current phase, 0 for every other;
/// - `rpc_shutdown_step_duration_seconds{step}`: how long each step of the shutdown
///   took, for the steps taken so far (none before shutdown);
/// - `rpc_shutdown_step_outcome{step,outcome}`: 1 for how each step taken ended
///   (`completed`, `timed-out`, `skipped`), 0 for the other outcomes;
/// - `rpc_registrations`: instances registered now (one per service and registry);
/// - `rpc_registrations_pending`: registrations the registry may not show as they are,
///   being written again (registering again after a failed upgrade or at an online
///   failed and is retried, the registry client lost its session and restores it, or a
///   manual offline's withdrawal failed and is retried);
/// - `rpc_upgrades_total{result}`: hot upgrades by result (`succeeded`, `failed`,
///   `refused`, `cancelled`) in this process (a process that succeeded exits soon after: its
///   successor starts again from 0);
/// - `rpc_upgrade_time_to_ready_seconds`: from the start of the last new process to its
///   `ready` (absent before the first upgrade that got that far).
#[derive(Debug)]
pub(super) struct LifecycleCollector {
    lifecycle: Lifecycle,
}

impl LifecycleCollector {
    pub(super) fn new(lifecycle: Lifecycle) -> Self {
        Self { lifecycle }
    }
}

impl Collector for LifecycleCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let current = self.lifecycle.phase();
        let names: Vec<_> = Phase::ALL.iter().map(Phase::to_string).collect();
        gauges(
            &mut encoder,
            "rpc_lifecycle_phase",
            "1 for the phase the application is in, 0 for the others.",
            None,
            Phase::ALL
                .iter()
                .zip(&names)
                .map(|(phase, name)| ([("phase", name.as_str())], u32::from(*phase == current))),
        )?;

        let steps = self.lifecycle.shutdown_steps();
        let step_names: Vec<_> = steps.iter().map(|step| step.step.to_string()).collect();
        gauges(
            &mut encoder,
            "rpc_shutdown_step_duration",
            "How long each shutdown step took (steps taken so far).",
            Some(&SECONDS),
            steps
                .iter()
                .zip(&step_names)
                .map(|(step, name)| ([("step", name.as_str())], step.duration.as_secs_f64())),
        )?;
        let outcome_names = StepOutcome::ALL.map(|outcome| outcome.to_string());
        gauges(
            &mut encoder,
            "rpc_shutdown_step_outcome",
            "1 for how each shutdown step taken ended, 0 for the other outcomes.",
            None,
            steps.iter().zip(&step_names).flat_map(|(step, name)| {
                StepOutcome::ALL
                    .iter()
                    .zip(&outcome_names)
                    .map(move |(outcome, outcome_name)| {
                        (
                            [("step", name.as_str()), ("outcome", outcome_name.as_str())],
                            u32::from(*outcome == step.outcome),
                        )
                    })
            }),
        )?;

        gauge(
            &mut encoder,
            "rpc_registrations",
            "Instances registered now (one per provided service and registry).",
            self.lifecycle.registrations().len(),
        )?;
        let pending = self
            .lifecycle
            .registrations_by_registry()
            .iter()
            .filter(|registration| registration.pending.is_some())
            .count();
        gauge(
            &mut encoder,
            "rpc_registrations_pending",
            "Registrations the registry may not show as they are (missing, or still listed after a manual offline), being written again.",
            pending,
        )?;

        let upgrades = self.lifecycle.upgrade_counts();
        let results = UpgradeResult::ALL.map(|result| result.to_string());
        counters(
            &mut encoder,
            "rpc_upgrades",
            "Hot upgrades of this process, by result.",
            UpgradeResult::ALL
                .iter()
                .zip(&results)
                .map(|(result, name)| {
                    let count = match result {
                        UpgradeResult::Succeeded => upgrades.succeeded,
                        UpgradeResult::Failed => upgrades.failed,
                        UpgradeResult::Refused => upgrades.refused,
                        UpgradeResult::Cancelled => upgrades.cancelled,
                    };
                    ([("result", name.as_str())], count)
                }),
        )?;
        gauges(
            &mut encoder,
            "rpc_upgrade_time_to_ready",
            "From the start of the last hot upgrade's new process to its ready.",
            Some(&SECONDS),
            upgrades
                .last_time_to_ready
                .map(|ready| (super::scrape::NO_LABELS, ready.as_secs_f64())),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rpc_lifecycle::ShutdownConfig;
    use rpc_lifecycle::StartPlan;

    use super::*;
    use crate::observe::scrape::encode_one;

    #[tokio::test(start_paused = true)]
    async fn the_phase_moves_and_the_steps_appear_as_shutdown_runs() {
        let mut config = ShutdownConfig::default();
        config.internal_signal = false;
        config.offline_request_window_timeout = Duration::from_millis(100);
        let lifecycle = Lifecycle::new("test", config);
        let text = encode_one(LifecycleCollector::new(lifecycle.clone()));
        assert!(
            text.contains("rpc_lifecycle_phase{phase=\"created\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("rpc_lifecycle_phase{phase=\"serving\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("rpc_registrations 0\n"), "{text}");
        assert!(text.contains("rpc_registrations_pending 0\n"), "{text}");
        assert!(
            text.contains("rpc_upgrades_total{result=\"refused\"} 0\n"),
            "{text}"
        );
        assert!(
            !text.contains("rpc_shutdown_step_duration_seconds{"),
            "{text}"
        );

        lifecycle.start(StartPlan::default()).await.unwrap();
        let text = encode_one(LifecycleCollector::new(lifecycle.clone()));
        assert!(
            text.contains("rpc_lifecycle_phase{phase=\"serving\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("rpc_lifecycle_phase{phase=\"created\"} 0\n"),
            "{text}"
        );

        lifecycle.before_shutdown().await;
        let text = encode_one(LifecycleCollector::new(lifecycle));
        assert!(
            text.contains("rpc_lifecycle_phase{phase=\"stopped\"} 1\n"),
            "{text}"
        );
        // No service is exported, so no consumer can be waited for: step 2 is skipped
        // at once (and reported so) rather than sitting out the offline window.
        assert!(
            text.contains("rpc_shutdown_step_duration_seconds{step=\"wait-for-consumers\"} 0.0\n"),
            "step 2 skipped without waiting: {text}"
        );
        assert!(
            text.contains(
                "rpc_shutdown_step_outcome{step=\"wait-for-consumers\",outcome=\"skipped\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rpc_shutdown_step_outcome{step=\"callbacks\",outcome=\"completed\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "rpc_shutdown_step_outcome{step=\"callbacks\",outcome=\"timed-out\"} 0\n"
            ),
            "{text}"
        );
    }
}
