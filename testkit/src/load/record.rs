//! What a load run records: counts, failures by code, latency histograms (steady, during
//! restarts, successes) and per-second figures, with a bounded number of seconds whose
//! histogram is still open.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

use crate::measure::latency_histogram;

/// Result of one call: the provider that answered, or the status it failed with.
pub type CallResult = Result<String, tonic::Status>;

/// Counts of one second of the run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Second {
    /// Requests sent in this second.
    pub sent: u64,
    /// Requests sent in this second that succeeded.
    pub succeeded: u64,
    /// Requests sent in this second that failed.
    pub failed: u64,
    /// 99th percentile latency of this second's requests, in ms (filled when the run
    /// ends; see [`LoadRecord::p99_ms`] while it runs).
    pub p99_ms: f64,
}

/// Everything recorded during a run.
#[derive(Debug)]
pub struct LoadRecord {
    /// When sending started.
    pub started: Instant,
    /// Requests due by the schedule so far (those not sent included).
    pub sent: u64,
    /// Requests not sent because `max_outstanding` requests were in flight (also counted
    /// in `sent` and as failed with `ResourceExhausted`).
    pub not_sent: u64,
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Failed requests by gRPC status code name.
    pub failed_by_code: BTreeMap<String, u64>,
    /// Up to 20 distinct failure messages, for the report.
    pub failure_samples: Vec<String>,
    /// Successful replies per provider address.
    pub by_provider: BTreeMap<String, u64>,
    /// Latency (µs) of requests sent while no restart was under way.
    pub steady: Histogram<u64>,
    /// Latency (µs) of requests sent while an instance was restarting.
    pub during_restart: Histogram<u64>,
    /// Latency (µs) of the requests that succeeded (an overload's goodput is judged on
    /// them: a refusal answered at once must not make the successes look fast).
    pub succeeded_latency: Histogram<u64>,
    /// Per-second counts, indexed by second since start.
    pub seconds: Vec<Second>,
    /// The latency histograms of the last [`OPEN_SECONDS`] seconds, the oldest first
    /// (second number `first_open`); an older second's p99 is already in `seconds`.
    second_histograms: VecDeque<Histogram<u64>>,
    first_open: usize,
    last_second: usize,
}

/// How many seconds keep their latency histogram open (about 140 KiB each). A second
/// older than that has its p99 computed and its histogram dropped, so a run of any length
/// holds a bounded number of them (a ten-minute soak held 600, 80 MiB, before); an answer
/// that arrives later still counts everywhere but in that second's p99. Ten times the
/// 3 s call timeout of the examples.
pub const OPEN_SECONDS: usize = 30;

impl LoadRecord {
    pub(super) fn new(started: Instant, duration: Duration) -> Self {
        Self {
            last_second: (duration.as_millis().div_ceil(1000) as usize).saturating_sub(1),
            started,
            sent: 0,
            not_sent: 0,
            succeeded: 0,
            failed_by_code: BTreeMap::new(),
            failure_samples: Vec::new(),
            by_provider: BTreeMap::new(),
            steady: latency_histogram(),
            during_restart: latency_histogram(),
            succeeded_latency: latency_histogram(),
            seconds: Vec::new(),
            second_histograms: VecDeque::new(),
            first_open: 0,
        }
    }

    /// 99th percentile latency (ms) of the requests sent in `second`, so far; 0 for a
    /// second without answers. Computed when read: a quantile scans the histogram,
    /// too costly for every answer under the record's lock.
    pub fn p99_ms(&self, second: usize) -> f64 {
        match second.checked_sub(self.first_open) {
            Some(open) => self
                .second_histograms
                .get(open)
                .map_or(0.0, |h| h.value_at_quantile(0.99) as f64 / 1000.0),
            None => self.seconds.get(second).map_or(0.0, |s| s.p99_ms),
        }
    }

    /// Computes the p99 of the oldest open second and drops its histogram.
    fn close_oldest_second(&mut self) {
        if let Some(histogram) = self.second_histograms.pop_front() {
            self.seconds[self.first_open].p99_ms =
                histogram.value_at_quantile(0.99) as f64 / 1000.0;
            self.first_open += 1;
        }
    }

    /// Fills every open second's `p99_ms` (once, when the run is over).
    pub(super) fn finish_seconds(&mut self) {
        while !self.second_histograms.is_empty() {
            self.close_oldest_second();
        }
    }

    /// Requests that failed.
    pub fn failed(&self) -> u64 {
        self.failed_by_code.values().sum()
    }

    fn second(&mut self, at: Instant) -> usize {
        // A request sent in the last instant of the run belongs to its last second, not
        // to a second of its own.
        let index =
            (at.saturating_duration_since(self.started).as_secs() as usize).min(self.last_second);
        while self.seconds.len() <= index {
            self.seconds.push(Second::default());
            self.second_histograms.push_back(latency_histogram());
            if self.second_histograms.len() > OPEN_SECONDS {
                self.close_oldest_second();
            }
        }
        index
    }

    pub(super) fn record(
        &mut self,
        sent_at: Instant,
        latency: Duration,
        result: CallResult,
        restarting: bool,
    ) {
        let ok = result.is_ok();
        let index = self.count(sent_at, result, 1);
        let micros = latency.as_micros().max(1) as u64;
        if ok {
            let _ = self.succeeded_latency.record(micros);
        }
        if let Some(histogram) = index
            .checked_sub(self.first_open)
            .and_then(|open| self.second_histograms.get_mut(open))
        {
            let _ = histogram.record(micros);
        }
        let target = if restarting {
            &mut self.during_restart
        } else {
            &mut self.steady
        };
        let _ = target.record(micros);
    }

    /// Requests up to number `through` (from 1), `count` of them, due by `at`, were not
    /// sent: failures with no latency, counted at once (a rate the machine cannot send
    /// makes millions a second). `sent` moves with them, so readers never see more not
    /// sent than sent.
    pub(super) fn record_not_sent(
        &mut self,
        through: u64,
        count: u64,
        at: Instant,
        status: &tonic::Status,
    ) {
        self.sent = through;
        self.not_sent += count;
        self.count(at, Err(status.clone()), count);
    }

    /// Counts `result`, `times` times, in the totals and in the second of `sent_at`;
    /// returns that second.
    fn count(&mut self, sent_at: Instant, result: CallResult, times: u64) -> usize {
        let index = self.second(sent_at);
        self.seconds[index].sent += times;
        match result {
            Ok(provider) => {
                self.succeeded += times;
                self.seconds[index].succeeded += times;
                *self.by_provider.entry(provider).or_default() += times;
            }
            Err(status) => {
                self.seconds[index].failed += times;
                *self
                    .failed_by_code
                    .entry(format!("{:?}", status.code()))
                    .or_default() += times;
                let sample = format!("{:?}: {}", status.code(), status.message());
                if self.failure_samples.len() < 20 && !self.failure_samples.contains(&sample) {
                    self.failure_samples.push(sample);
                }
            }
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long run keeps at most `OPEN_SECONDS` histograms; closed seconds keep their p99.
    #[tokio::test(start_paused = true)]
    async fn old_seconds_are_closed_with_their_p99() {
        let started = Instant::now();
        let mut record = LoadRecord::new(started, Duration::from_secs(100));
        for second in 0..100u64 {
            let at = started + Duration::from_secs(second);
            let latency = Duration::from_millis(second + 1);
            record.record(at, latency, Ok("p".to_owned()), false);
            assert!(record.second_histograms.len() <= OPEN_SECONDS);
        }
        assert!(
            (record.p99_ms(0) - 1.0).abs() < 0.01,
            "{}",
            record.p99_ms(0)
        );
        assert!(
            (record.p99_ms(99) - 100.0).abs() < 0.1,
            "{}",
            record.p99_ms(99)
        );
        record.finish_seconds();
        assert!((record.seconds[99].p99_ms - 100.0).abs() < 0.1);
    }
}
