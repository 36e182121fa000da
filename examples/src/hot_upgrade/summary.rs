//! What a `hot-upgrade` run found: the numbers, the table a person reads and the JSON a
//! machine reads.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use lossless_rpc::UpgradeReport;
use serde::Serialize;

use super::options::{ChildBehaviour, StreamMode, Trigger};

/// Latency percentiles, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Requests measured.
    pub count: u64,
}

impl Latency {
    /// The percentiles of `histogram` (microseconds).
    pub fn of(histogram: &Histogram<u64>) -> Self {
        let ms = |micros: u64| micros as f64 / 1000.0;
        if histogram.is_empty() {
            return Self::default();
        }
        Self {
            p50: ms(histogram.value_at_quantile(0.50)),
            p99: ms(histogram.value_at_quantile(0.99)),
            max: ms(histogram.max()),
            count: histogram.len(),
        }
    }
}

/// One generation of the provider, seen from outside.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GenerationRecord {
    /// Its pid.
    pub pid: i32,
    /// The inode of the listening socket it holds.
    pub listening_inode: Option<u64>,
    /// Its exit code once it exited (0 after a clean hand-over).
    pub exit_code: Option<i32>,
}

/// The whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Unary requests due.
    pub sent: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Failed, all codes.
    pub failed: u64,
    /// Failed, by gRPC code.
    pub failed_by_code: BTreeMap<String, u64>,
    /// Samples of failures (unary, connections, streams).
    pub failure_samples: Vec<String>,
    /// New connections dialled.
    pub connections_attempted: u64,
    /// New connections refused.
    pub connections_refused: u64,
    /// Calls on new connections that failed.
    pub connection_calls_failed: u64,
    /// What the server streams were (`--streams short|resumable`).
    pub stream_mode: StreamMode,
    /// Server streams opened.
    pub streams_opened: u64,
    /// Server streams the old process moved (ended as moved; its consumer re-opened
    /// them on the new one): resumable streams only.
    pub streams_moved: u64,
    /// Events the resumable streams received in order, all streams together.
    pub stream_events: u64,
    /// Server streams cut: ended with an error, short of their replies, or (resumable)
    /// with an event skipped or repeated.
    pub streams_cut: u64,
    /// Upgrades that succeeded.
    pub upgrades: usize,
    /// Upgrades triggered.
    pub upgrades_planned: usize,
    /// Upgrades that failed (expected with `--child fail|hang`).
    pub upgrades_failed: usize,
    /// Each upgrade's report, in order (the final one of each handed-over generation).
    pub upgrade_details: Vec<UpgradeReport>,
    /// Each generation's final shutdown report, as it printed it (connections closed
    /// gracefully, idle or forced; requests rejected; streams cut).
    pub shutdown_reports: Vec<String>,
    /// What a watcher of the registry saw of the instance; `None` without a registry
    /// (nothing was watched, so nothing is claimed).
    pub registry_presence: Option<RegistryPresence>,
    /// The registry, if any.
    pub registry: Option<String>,
    /// How upgrades were triggered.
    pub trigger: Trigger,
    /// How the first new binary behaved.
    pub child: ChildBehaviour,
    /// Descriptors of the first generation before any client connected.
    pub fds_before: usize,
    /// Descriptors of the last generation once every client left.
    pub fds_after: usize,
    /// Every generation, in order.
    pub generations: Vec<GenerationRecord>,
    /// Provider processes alive at the end (before the last was stopped).
    pub processes_at_end: usize,
    /// Zombies among them.
    pub zombies: usize,
    /// Unary latency outside upgrades.
    pub latency_steady_ms: Latency,
    /// Unary latency from each trigger to the old process's exit.
    pub latency_during_upgrades_ms: Latency,
    /// Wall time of the run, seconds.
    pub elapsed_s: f64,
    /// Counts of each second of the load (for `--plot`).
    pub per_second: Vec<rpc_testkit::load::Second>,
    /// When each upgrade ran, seconds after the load started.
    pub upgrade_windows: Vec<UpgradeWindow>,
}

/// What a watcher of the registry saw of the provider's instance through the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RegistryPresence {
    /// Snapshots the watcher received.
    pub snapshots: u64,
    /// Whether any listed the instance.
    pub seen: bool,
    /// Snapshots after the first that listed it that did not: each a moment the
    /// instance was missing.
    pub snapshots_without: u64,
    /// How long it was missing in all, milliseconds (wall clock, for the table).
    pub absent_ms: f64,
}

impl RegistryPresence {
    /// Listed, and never missing after that.
    pub fn never_missing(&self) -> bool {
        self.seen && self.snapshots_without == 0
    }
}

/// When one upgrade ran, seconds after the load started.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UpgradeWindow {
    /// The trigger.
    pub from_s: f64,
    /// Its end: the old generation's exit, or the reported failure.
    pub to_s: f64,
    /// Whether the new generation took over.
    pub succeeded: bool,
}

impl Summary {
    /// The p99 during upgrades the issue allows: max(3 × steady p99, steady p99 + 50 ms).
    pub fn p99_bound_ms(&self) -> f64 {
        let steady = self.latency_steady_ms.p99;
        (3.0 * steady).max(steady + 50.0)
    }

    /// Whether every socket inode is the first generation's.
    pub fn same_socket(&self) -> bool {
        let first = self.generations.first().and_then(|g| g.listening_inode);
        first.is_some() && self.generations.iter().all(|g| g.listening_inode == first)
    }

    /// Every acceptance criterion of the run that counts something (what the tests
    /// assert, through this function): nothing failed or was cut, every upgrade ended as
    /// planned, one socket, one process, no zombie, no descriptor leaked, and with a
    /// registry the instance listed throughout. The latency criterion is
    /// [`Summary::latency_within_bound`]: a wall-clock figure, shown by runs of the
    /// binary, not asserted by tests on a shared machine.
    pub fn lossless(&self) -> bool {
        let expected_failures = usize::from(self.child != ChildBehaviour::Good);
        self.failed == 0
            && self.connections_refused == 0
            && self.connection_calls_failed == 0
            && self.streams_cut == 0
            && self.upgrades_failed == expected_failures
            && self.upgrades + self.upgrades_failed == self.upgrades_planned
            && self.same_socket()
            && self.processes_at_end == 1
            && self.zombies == 0
            && self.fds_after == self.fds_before
            && self
                .registry_presence
                .as_ref()
                .is_none_or(RegistryPresence::never_missing)
    }

    /// Whether the p99 during upgrades stayed within [`Summary::p99_bound_ms`].
    pub fn latency_within_bound(&self) -> bool {
        self.latency_during_upgrades_ms.p99 <= self.p99_bound_ms()
    }

    /// The table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let yes = |ok: bool| if ok { "yes" } else { "NO" };
        let _ = writeln!(
            out,
            "hot-upgrade: {} upgrades by {}, child {}, registry {}",
            self.upgrades_planned,
            match self.trigger {
                Trigger::Signal => "signal",
                Trigger::Admin => "admin",
            },
            super::child_word(self.child),
            self.registry.as_deref().unwrap_or("none (direct address)")
        );
        let _ = writeln!(out, "| measure | value |");
        let _ = writeln!(out, "|---|---|");
        let rows: Vec<(&str, String)> = vec![
            (
                "requests sent / ok / failed",
                format!("{} / {} / {}", self.sent, self.succeeded, self.failed),
            ),
            ("failed by code", format!("{:?}", self.failed_by_code)),
            (
                "new connections / refused / failed calls",
                format!(
                    "{} / {} / {}",
                    self.connections_attempted,
                    self.connections_refused,
                    self.connection_calls_failed
                ),
            ),
            (
                "server streams (short|resumable) opened / moved / cut",
                format!(
                    "{} {} / {} / {}",
                    match self.stream_mode {
                        StreamMode::Short => "short",
                        StreamMode::Resumable => "resumable",
                    },
                    self.streams_opened,
                    self.streams_moved,
                    self.streams_cut
                ),
            ),
            (
                "upgrades succeeded / failed / planned",
                format!(
                    "{} / {} / {}",
                    self.upgrades, self.upgrades_failed, self.upgrades_planned
                ),
            ),
            (
                "p50 / p99 steady (ms)",
                format!(
                    "{:.2} / {:.2}",
                    self.latency_steady_ms.p50, self.latency_steady_ms.p99
                ),
            ),
            (
                "p50 / p99 during upgrades (ms)",
                format!(
                    "{:.2} / {:.2} (bound {:.1})",
                    self.latency_during_upgrades_ms.p50,
                    self.latency_during_upgrades_ms.p99,
                    self.p99_bound_ms()
                ),
            ),
            (
                "same listening socket (inode) in every generation",
                format!(
                    "{} (inode {})",
                    yes(self.same_socket()),
                    self.generations
                        .first()
                        .and_then(|g| g.listening_inode)
                        .map_or("unknown".to_owned(), |inode| inode.to_string())
                ),
            ),
            (
                "generations (pid: exit code)",
                self.generations
                    .iter()
                    .map(|g| {
                        format!(
                            "{}: {}",
                            g.pid,
                            g.exit_code.map_or("serving".to_owned(), |c| c.to_string())
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "provider processes at the end / zombies",
                format!("{} / {}", self.processes_at_end, self.zombies),
            ),
            (
                "provider fds before / after",
                format!("{} / {}", self.fds_before, self.fds_after),
            ),
            (
                "instance missing from the registry (snapshots / ms)",
                match &self.registry_presence {
                    Some(p) if p.seen => format!("{} / {:.0}", p.snapshots_without, p.absent_ms),
                    Some(p) => format!("never listed ({} snapshots)", p.snapshots),
                    None => "n/a (no registry)".to_owned(),
                },
            ),
            ("lossless", yes(self.lossless()).to_owned()),
            (
                "p99 during upgrades within its bound",
                yes(self.latency_within_bound()).to_owned(),
            ),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "| {name} | {value} |");
        }
        for (n, report) in self.upgrade_details.iter().enumerate() {
            let _ = writeln!(out, "upgrade {}: {report}", n + 1);
        }
        for report in &self.shutdown_reports {
            let _ = writeln!(out, "generation exit: {report}");
        }
        for sample in &self.failure_samples {
            let _ = writeln!(out, "failure: {sample}");
        }
        out
    }

    /// Writes the JSON to `path`.
    ///
    /// # Errors
    /// The file system's error.
    pub fn write_json(&self, path: &std::path::Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, json)
    }
}
