//! What a run found: the numbers, the table a person reads and the JSON a machine reads.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use rpc_testkit::load::{LoadRecord, Second};
use serde::Serialize;

use super::memory::peak_rss;
use super::options::{Mode, Options};
use super::plan::restart_plan;
use super::readiness::{self, ReadinessRecord};
use super::restart_record::RestartRecord;
use super::role::Role;
use super::surge::Order;

/// Latency percentiles, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Requests measured.
    pub count: u64,
}

impl Latency {
    fn of(histogram: &Histogram<u64>) -> Self {
        let ms = |micros: u64| micros as f64 / 1000.0;
        if histogram.is_empty() {
            return Self::default();
        }
        Self {
            p50: ms(histogram.value_at_quantile(0.50)),
            p90: ms(histogram.value_at_quantile(0.90)),
            p99: ms(histogram.value_at_quantile(0.99)),
            max: ms(histogram.max()),
            count: histogram.len(),
        }
    }
}

/// What the resumable streams of a run came to (`--streams resumable`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamTally {
    /// Subscriptions opened (each is followed to the end of the run).
    pub streams_opened: u64,
    /// Times a provider moved one (ended it as moved as it stopped), as the load client
    /// saw them; each was re-opened elsewhere unless it is also counted as cut.
    pub streams_moved: u64,
    /// Subscriptions that ended before the run did, or skipped or repeated an event.
    pub streams_cut: u64,
    /// Events received in order, all subscriptions together.
    pub events: u64,
    /// What went wrong, if anything (at most 10).
    pub samples: Vec<String>,
}

/// The result of a run; serialised as the `--json` summary.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Requests per second asked for.
    pub requested_rate: u32,
    /// Requests per second that left the client (requests not sent excluded).
    pub achieved_rate: f64,
    /// Requests sent.
    pub sent: u64,
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Requests that failed (those not sent included).
    pub failed: u64,
    /// Requests the load client did not send because `--max-outstanding` requests were
    /// in flight (counted in `sent` and `failed`, as `ResourceExhausted`).
    pub not_sent: u64,
    /// Failed requests by gRPC status code.
    pub failed_by_code: BTreeMap<String, u64>,
    /// Up to 20 failure messages.
    pub failure_samples: Vec<String>,
    /// `succeeded / sent`, in percent.
    pub success_rate: f64,
    /// Restarts carried out.
    pub restarts: usize,
    /// Restarts planned (every proxy and provider, per round).
    pub restarts_planned: usize,
    /// Each restart.
    pub restart_details: Vec<RestartRecord>,
    /// Whether graceful online/offline was on.
    pub graceful: bool,
    /// The registry URL.
    pub registry: String,
    /// `in-process` or `processes`.
    pub mode: Mode,
    /// `--max-surge` as given (`25%`, `1`).
    pub max_surge: String,
    /// `--max-unavailable` as given.
    pub max_unavailable: String,
    /// How each proxy was replaced: `start-then-stop` or `stop-then-start`.
    pub proxy_order: Option<Order>,
    /// How each provider was replaced.
    pub provider_order: Option<Order>,
    /// Proxies in the chain.
    pub proxies: usize,
    /// Providers in the chain.
    pub providers: usize,
    /// Payload per request, in bytes.
    pub payload_bytes: usize,
    /// Provider work per request, in ms.
    pub work_ms: u32,
    /// Wall-clock length of the run, in seconds.
    pub duration_s: f64,
    /// Latency of every request.
    pub latency_ms: Latency,
    /// Latency of requests sent while no instance was restarting.
    pub latency_steady_ms: Latency,
    /// Latency of requests sent while an instance was restarting.
    pub latency_during_restarts_ms: Latency,
    /// Latency of the requests that succeeded.
    pub latency_succeeded_ms: Latency,
    /// Largest resident set size of this process during the run, in bytes (Linux: its
    /// own `VmHWM`, not `getrusage`'s figure, which includes cargo's when run by
    /// `cargo run`).
    pub peak_rss_bytes: Option<u64>,
    /// Per-second counts.
    pub per_second: Vec<Second>,
    /// With `--admin`: each instance's readiness as its admin endpoint told it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readiness: Vec<ReadinessRecord>,
    /// With `--streams resumable`: what the streams came to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamTally>,
}

impl Summary {
    pub(crate) fn new(
        options: &Options,
        record: LoadRecord,
        restarts: Vec<RestartRecord>,
        elapsed: Duration,
    ) -> Self {
        let mut all = record.steady.clone();
        let _ = all.add(&record.during_restart);
        let failed = record.failed();
        let sending_s = options.duration.as_secs_f64();
        Self {
            requested_rate: options.rate,
            achieved_rate: (record.sent - record.not_sent) as f64 / sending_s,
            not_sent: record.not_sent,
            sent: record.sent,
            succeeded: record.succeeded,
            failed,
            failed_by_code: record.failed_by_code,
            failure_samples: record.failure_samples,
            success_rate: if record.sent == 0 {
                0.0
            } else {
                100.0 * record.succeeded as f64 / record.sent as f64
            },
            restarts: restarts.iter().filter(|r| r.error.is_none()).count(),
            restarts_planned: restart_plan(options).len(),
            restart_details: restarts,
            graceful: options.graceful,
            registry: lossless_rpc::registry::RegistryUrl::parse(&options.registry)
                .map(|u| u.redacted().to_owned())
                .unwrap_or_else(|_| options.registry.clone()),
            mode: options.mode,
            max_surge: options.max_surge.to_string(),
            max_unavailable: options.max_unavailable.to_string(),
            proxy_order: options.order(Role::Proxy).ok(),
            provider_order: options.order(Role::Provider).ok(),
            proxies: options.proxies,
            providers: options.providers,
            payload_bytes: options.payload,
            work_ms: options.work_ms,
            duration_s: elapsed.as_secs_f64(),
            latency_ms: Latency::of(&all),
            latency_steady_ms: Latency::of(&record.steady),
            latency_during_restarts_ms: Latency::of(&record.during_restart),
            latency_succeeded_ms: Latency::of(&record.succeeded_latency),
            peak_rss_bytes: peak_rss(),
            per_second: record.seconds,
            readiness: Vec::new(),
            streams: None,
        }
    }

    /// Whether the run proved its point: with graceful on, every request succeeded and
    /// every planned restart happened.
    pub fn lossless(&self) -> bool {
        self.failed == 0
            && self.restarts == self.restarts_planned
            && self
                .streams
                .as_ref()
                .is_none_or(|streams| streams.streams_cut == 0)
    }

    /// The table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let graceful = if self.graceful { "on" } else { "off" };
        let _ = writeln!(
            out,
            "\nrolling-deploy: {} proxies, {} providers, graceful {graceful}, registry {}, {}",
            self.proxies,
            self.providers,
            self.registry,
            self.mode.name()
        );
        let order = |order: Option<Order>| order.map_or("-", Order::name);
        let _ = writeln!(
            out,
            "  order     proxies {}, providers {} (--max-surge {}, --max-unavailable {})",
            order(self.proxy_order),
            order(self.provider_order),
            self.max_surge,
            self.max_unavailable
        );
        let _ = writeln!(
            out,
            "  rate      requested {:>8} req/s   achieved {:>10.1} req/s",
            self.requested_rate, self.achieved_rate
        );
        let _ = writeln!(
            out,
            "  requests  sent {:>10}   succeeded {:>10}   failed {:>8}   success {:.4} %",
            self.sent, self.succeeded, self.failed, self.success_rate
        );
        if self.not_sent > 0 {
            let _ = writeln!(
                out,
                "            not sent: {} (the load client already had --max-outstanding requests in flight)",
                self.not_sent
            );
        }
        for (code, count) in &self.failed_by_code {
            let _ = writeln!(out, "            failed with {code}: {count}");
        }
        for sample in self.failure_samples.iter().take(5) {
            let _ = writeln!(out, "            e.g. {sample}");
        }
        let _ = writeln!(
            out,
            "  latency (ms)            p50      p90      p99      max    requests"
        );
        for (label, latency) in [
            ("all", &self.latency_ms),
            ("steady", &self.latency_steady_ms),
            ("during restarts", &self.latency_during_restarts_ms),
            ("succeeded", &self.latency_succeeded_ms),
        ] {
            let _ = writeln!(
                out,
                "    {label:<18} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>10}",
                latency.p50, latency.p90, latency.p99, latency.max, latency.count
            );
        }
        let _ = writeln!(
            out,
            "  restarts  {} of {} planned",
            self.restarts, self.restarts_planned
        );
        for restart in &self.restart_details {
            let detail = match (&restart.report, &restart.error) {
                (_, Some(error)) => format!("FAILED: {error}"),
                (Some(report), None) => report.to_string(),
                (None, None) => "killed".to_owned(),
            };
            let _ = writeln!(
                out,
                "    {:>6.1}s {:<11} stop {:>6.0} ms  {detail}",
                restart.at_s, restart.instance, restart.stop_ms
            );
        }
        readiness::write_table(&self.readiness, &mut out);
        if let Some(streams) = &self.streams {
            let _ = writeln!(
                out,
                "  streams   resumable  opened {}   moved {}   cut {}   events in order {}",
                streams.streams_opened, streams.streams_moved, streams.streams_cut, streams.events
            );
            for sample in &streams.samples {
                let _ = writeln!(out, "            e.g. {sample}");
            }
        }
        if let Some(rss) = self.peak_rss_bytes {
            let _ = writeln!(out, "  peak RSS  {:.1} MiB", rss as f64 / (1024.0 * 1024.0));
        }
        let cut = self
            .streams
            .as_ref()
            .map_or(0, |streams| streams.streams_cut);
        let verdict = match (self.failed, self.restarts == self.restarts_planned) {
            (0, true) if cut > 0 => "STREAMS CUT: 0 requests failed, but streams were cut",
            (0, true) => "0 requests failed",
            (0, false) => "RESTARTS MISSING: 0 requests failed, but not every restart happened",
            _ => "REQUESTS FAILED",
        };
        let _ = writeln!(
            out,
            "  result    {verdict} ({} of {} failed; {} of {} restarts)",
            self.failed, self.sent, self.restarts, self.restarts_planned
        );
        out
    }

    /// Writes the JSON summary to `path`.
    ///
    /// # Errors
    /// The I/O error, if the file cannot be written.
    pub fn write_json(&self, path: &std::path::Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, json)
    }
}
