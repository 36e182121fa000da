//! The phase notifier: a task that watches an application's phases and tells systemd
//! each one (the table in the module above).
//!
//! It reads the lifecycle's phase *history*, not only the latest value of the watch
//! channel: a `watch` receiver sees the newest phase only, and shutdown steps that end at
//! once (rejecting, an empty drain) would otherwise be skipped — among them, in a quick
//! start followed by a quick stop, `serving`, and with it `READY=1`.

use rpc_core::Phase;
use rpc_lifecycle::Lifecycle;
use sd_notify::NotifyState;
use tokio::sync::watch;
use tokio::time::Instant;

use super::STOP_MARGIN;

/// Starts the phase notifier of `lifecycle` if this process has a notify socket; does
/// nothing otherwise. The task ends when the application reaches [`Phase::Stopped`];
/// the returned handle tells when it did.
///
/// # Panics
/// Outside a tokio runtime (the notifier is spawned on it).
pub(crate) fn notify_phases(lifecycle: &Lifecycle) -> NotifierFinished {
    if !super::notify_socket_set() {
        return NotifierFinished(None);
    }
    let (finished, watch) = watch::channel(());
    let notifier = PhaseNotifier::new(lifecycle.clone());
    tokio::spawn(async move {
        notifier.run(send_logged).await;
        // Dropped here (or by a panic): every receiver's `changed()` ends.
        drop(finished);
    });
    NotifierFinished(Some(watch))
}

/// Whether the phase notifier has told systemd everything, up to `stopped`. The process
/// must not exit before: the last datagrams would be lost, and systemd would see the
/// service vanish mid-shutdown.
#[derive(Clone, Debug)]
pub(crate) struct NotifierFinished(Option<watch::Receiver<()>>);

impl NotifierFinished {
    /// Waits until the notifier task has ended (at once if none was started).
    pub(crate) async fn wait(&self) {
        if let Some(mut finished) = self.0.clone() {
            // Nothing is ever sent: `changed` returns (an error) when the task, which
            // holds the sender, has ended.
            while finished.changed().await.is_ok() {}
        }
    }
}

/// Sends a datagram; a failure is logged, never fatal: systemd's view of the service is
/// a convenience, the service goes on without it.
fn send_logged(states: &[NotifyState<'_>]) {
    if let Err(error) = super::send(states) {
        tracing::warn!(%error, "systemd notification failed");
    }
}

/// What the notifier knows between phases.
struct PhaseNotifier {
    lifecycle: Lifecycle,
    /// Entries of the phase history already told.
    told: usize,
    /// Whether `READY=1` was sent.
    served: bool,
    /// The end of the shutdown sequence's own bound, once it began.
    stop_deadline: Option<Instant>,
}

impl PhaseNotifier {
    fn new(lifecycle: Lifecycle) -> Self {
        Self {
            lifecycle,
            told: 0,
            served: false,
            stop_deadline: None,
        }
    }

    /// Tells `send` every phase entered, in order, until [`Phase::Stopped`].
    async fn run(mut self, mut send: impl FnMut(&[NotifyState<'_>])) {
        // Subscribed before the first read of the history: a phase entered after that
        // read wakes the loop below, so none is missed.
        let mut phases = self.lifecycle.watch_phase();
        loop {
            let history = self.lifecycle.phase_history();
            for &(phase, entered) in history.iter().skip(self.told) {
                let status = self.status(phase);
                let datagram = self.datagram(phase, entered, &status);
                if !datagram.is_empty() {
                    send(&datagram);
                }
            }
            self.told = history.len();
            let stopped = history.last().is_some_and(|(p, _)| *p == Phase::Stopped);
            if stopped || phases.changed().await.is_err() {
                return;
            }
        }
    }

    /// The `STATUS=` text of `phase`.
    fn status(&self, phase: Phase) -> String {
        match phase {
            Phase::Stopped if !self.served => "stopped before serving".to_owned(),
            phase => phase.to_string(),
        }
    }

    /// What systemd is told when the application entered `phase` at `entered`.
    fn datagram<'a>(
        &mut self,
        phase: Phase,
        entered: Instant,
        status: &'a str,
    ) -> Vec<NotifyState<'a>> {
        match phase {
            // Not news: every application starts there.
            Phase::Created => Vec::new(),
            Phase::Starting | Phase::Stopped => vec![NotifyState::Status(status)],
            Phase::Serving => {
                self.served = true;
                vec![NotifyState::Ready, NotifyState::Status(status)]
            }
            // Every other phase is a step of the shutdown sequence.
            _ => {
                let mut datagram = Vec::with_capacity(3);
                if self.stop_deadline.is_none() {
                    datagram.push(NotifyState::Stopping);
                }
                let deadline = *self
                    .stop_deadline
                    .get_or_insert(entered + self.lifecycle.config().timeout);
                datagram.push(NotifyState::Status(status));
                datagram.push(NotifyState::ExtendTimeoutUsec(extension(deadline)));
                datagram
            }
        }
    }
}

/// `EXTEND_TIMEOUT_USEC`'s value: the time left until `deadline` plus [`STOP_MARGIN`],
/// in microseconds (saturating at `u32::MAX`, about 71 minutes).
fn extension(deadline: Instant) -> u32 {
    let left = deadline.saturating_duration_since(Instant::now()) + STOP_MARGIN;
    u32::try_from(left.as_micros()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;
    use rpc_lifecycle::ShutdownConfig;
    use rpc_lifecycle::StartPlan;

    use super::*;

    /// Runs a notifier for `lifecycle` whose datagrams are collected, one string each.
    fn collecting(lifecycle: &Lifecycle) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
        let datagrams = Arc::new(Mutex::new(Vec::new()));
        let sink = datagrams.clone();
        let notifier = PhaseNotifier::new(lifecycle.clone());
        let task = tokio::spawn(notifier.run(move |states: &[NotifyState<'_>]| {
            let lines: Vec<String> = states.iter().map(ToString::to_string).collect();
            sink.lock().push(lines.join("\n"));
        }));
        (datagrams, task)
    }

    fn lifecycle() -> Lifecycle {
        let mut config = ShutdownConfig::default();
        config.timeout = Duration::from_secs(10);
        config.internal_signal = false;
        Lifecycle::new("notified", config)
    }

    fn empty_plan() -> StartPlan {
        StartPlan {
            references: Vec::new(),
            check_timeout: Duration::from_secs(1),
            exports: Vec::new(),
            gates: Vec::new(),
            registries: Vec::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn start_and_shutdown_are_told_phase_by_phase() {
        let lifecycle = lifecycle();
        let (datagrams, task) = collecting(&lifecycle);
        lifecycle.start(empty_plan()).await.unwrap();
        lifecycle.before_shutdown().await;
        task.await.unwrap();

        let datagrams = datagrams.lock().clone();
        assert_eq!(datagrams[0], "STATUS=starting");
        assert_eq!(datagrams[1], "READY=1\nSTATUS=serving");
        // The sequence's own bound (10 s) plus the margin, from the moment it began.
        assert_eq!(
            datagrams[2],
            "STOPPING=1\nSTATUS=unregistering\nEXTEND_TIMEOUT_USEC=15000000"
        );
        let steps: Vec<&str> = datagrams[3..datagrams.len() - 1]
            .iter()
            .map(|d| d.lines().next().unwrap())
            .collect();
        assert_eq!(
            steps,
            [
                "STATUS=waiting-for-consumers",
                "STATUS=rejecting",
                "STATUS=draining-inbound",
                "STATUS=draining-outbound",
                "STATUS=destroying",
                "STATUS=callbacks",
            ]
        );
        assert_eq!(datagrams.last().unwrap(), "STATUS=stopped");
        // Each extension reaches the same end: it never grows as the sequence goes on.
        let extensions: Vec<u64> = datagrams
            .iter()
            .filter_map(|d| {
                d.lines()
                    .find_map(|l| l.strip_prefix("EXTEND_TIMEOUT_USEC="))
            })
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(extensions.len(), 7);
        assert!(
            extensions.windows(2).all(|w| w[1] <= w[0]),
            "{extensions:?}"
        );
        assert!(
            extensions
                .iter()
                .all(|&e| e >= STOP_MARGIN.as_micros() as u64)
        );
        assert_eq!(
            datagrams
                .iter()
                .filter(|d| d.contains("STOPPING=1"))
                .count(),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_start_is_never_ready_nor_stopping() {
        let lifecycle = lifecycle();
        let (datagrams, task) = collecting(&lifecycle);
        let mut plan = empty_plan();
        plan.gates.push(Box::new(|| {
            Box::pin(async { Err("warm-up failed".into()) })
        }));
        assert!(lifecycle.start(plan).await.is_err());
        task.await.unwrap();

        assert_eq!(
            *datagrams.lock(),
            ["STATUS=starting", "STATUS=stopped before serving"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn finished_waits_for_the_notifier_task_to_end() {
        NotifierFinished(None).wait().await;
        let (sender, receiver) = watch::channel(());
        let finished = NotifierFinished(Some(receiver));
        let waiting = tokio::spawn({
            let finished = finished.clone();
            async move { finished.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(sender);
        waiting.await.unwrap();
    }

    #[test]
    fn an_extension_past_u32_saturates() {
        let far = Instant::now() + Duration::from_secs(10_000);
        assert_eq!(extension(far), u32::MAX);
    }
}
