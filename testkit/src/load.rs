//! An open-loop load generator: requests leave on schedule at a fixed rate whether or
//! not earlier ones have finished, so a stalled server shows up as latency and
//! failures, not as a politely slower client (no coordinated omission).
//!
//! Requests still waiting for an answer are bounded by [`LoadOptions::max_outstanding`]:
//! a rate the system cannot absorb would otherwise hold ever more calls in memory until
//! the kernel ends the process. A request due while the bound is reached is not sent and
//! counts as failed with `RESOURCE_EXHAUSTED` (and as not sent), so the run still fails
//! and says why.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tokio::time::{Instant, MissedTickBehavior};

use crate::measure::latency_histogram;

/// Result of one call: the provider that answered, or the status it failed with.
pub type CallResult = Result<String, tonic::Status>;

/// What to send.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Requests per second.
    pub rate: u32,
    /// How long to send.
    pub duration: Duration,
    /// Most requests in flight at once; a request due beyond it is not sent (see the
    /// module docs). [`DEFAULT_MAX_OUTSTANDING`] unless set.
    pub max_outstanding: usize,
}

/// Default bound on requests in flight: 20 000, four seconds of the default 5 000
/// req/s — more than the 3 s call timeout lets pile up at that rate. Each request in
/// flight holds about 40 KiB across client, proxies and providers (measured: 824 MiB
/// peak RSS at the bound), so a smaller bound suits a smaller machine.
pub const DEFAULT_MAX_OUTSTANDING: usize = 20_000;

impl LoadOptions {
    /// `rate` requests/s for `duration`, with the default bound on requests in flight.
    pub fn new(rate: u32, duration: Duration) -> Self {
        Self {
            rate,
            duration,
            max_outstanding: DEFAULT_MAX_OUTSTANDING,
        }
    }
}

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
    fn new(started: Instant, duration: Duration) -> Self {
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
    fn finish_seconds(&mut self) {
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

    fn record(
        &mut self,
        sent_at: Instant,
        latency: Duration,
        result: CallResult,
        restarting: bool,
    ) {
        let ok = result.is_ok();
        let index = self.count(sent_at, result);
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

    /// Request number `number` (from 1), due at `at`, was not sent: a failure with no
    /// latency. `sent` moves with it, so readers never see more not sent than sent.
    fn record_not_sent(&mut self, number: u64, at: Instant, status: tonic::Status) {
        self.sent = number;
        self.not_sent += 1;
        self.count(at, Err(status));
    }

    /// Counts `result` in the totals and in the second of `sent_at`; returns that second.
    fn count(&mut self, sent_at: Instant, result: CallResult) -> usize {
        let index = self.second(sent_at);
        self.seconds[index].sent += 1;
        match result {
            Ok(provider) => {
                self.succeeded += 1;
                self.seconds[index].succeeded += 1;
                *self.by_provider.entry(provider).or_default() += 1;
            }
            Err(status) => {
                self.seconds[index].failed += 1;
                *self
                    .failed_by_code
                    .entry(format!("{:?}", status.code()))
                    .or_default() += 1;
                let sample = format!("{:?}: {}", status.code(), status.message());
                if self.failure_samples.len() < 20 && !self.failure_samples.contains(&sample) {
                    self.failure_samples.push(sample);
                }
            }
        }
        index
    }
}

fn over_limit(options: &LoadOptions) -> tonic::Status {
    tonic::Status::resource_exhausted(format!(
        "not sent: the load client already had {} requests in flight (the system under test \
         does not keep up with {} req/s)",
        options.max_outstanding, options.rate
    ))
}

/// A run in progress: shared by the sender, the call tasks and the observer (who may
/// flag restart windows and read progress).
#[derive(Clone)]
pub struct Load {
    record: Arc<Mutex<LoadRecord>>,
    restarting: Arc<std::sync::atomic::AtomicBool>,
    sending_done: Arc<std::sync::atomic::AtomicBool>,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

impl Load {
    /// Marks whether an instance is restarting now (latencies go to the "during
    /// restart" histogram).
    pub fn set_restarting(&self, restarting: bool) {
        self.restarting
            .store(restarting, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the schedule has ended: every request was sent (or counted as not sent);
    /// some may still await their answer.
    pub fn sending_done(&self) -> bool {
        self.sending_done.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether every request has been sent and answered.
    pub fn finished(&self) -> bool {
        self.finished.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reads the record so far.
    pub fn with_record<T>(&self, read: impl FnOnce(&LoadRecord) -> T) -> T {
        read(&self.record.lock())
    }
}

/// Sends `call(n)` at `options.rate` per second for `options.duration`, then waits for
/// every call to end and returns what was recorded. `observe` receives the run's handle
/// at once (to mark restarts or print progress).
pub async fn run<C, F>(options: LoadOptions, call: C, observe: impl FnOnce(Load)) -> LoadRecord
where
    C: Fn(u64) -> F,
    F: Future<Output = CallResult> + Send + 'static,
{
    let started = Instant::now();
    let load = Load {
        record: Arc::new(Mutex::new(LoadRecord::new(started, options.duration))),
        restarting: Arc::default(),
        sending_done: Arc::default(),
        finished: Arc::default(),
    };
    observe(load.clone());
    let mut tasks = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let total = u64::from(options.rate) * options.duration.as_millis() as u64 / 1000;
    let not_sent = over_limit(&options);
    let mut sent = 0u64;
    while sent < total {
        ticker.tick().await;
        // As many as the schedule says should have left by now: a late tick sends a
        // burst instead of silently lowering the rate.
        let due =
            (started.elapsed().as_micros() as u64 * u64::from(options.rate) / 1_000_000).min(total);
        while sent < due {
            while tasks.try_join_next().is_some() {}
            let restarting = load.restarting.load(std::sync::atomic::Ordering::Relaxed);
            let sent_at = Instant::now();
            if tasks.len() >= options.max_outstanding {
                sent += 1;
                load.record
                    .lock()
                    .record_not_sent(sent, sent_at, not_sent.clone());
                continue;
            }
            let future = call(sent);
            let record = load.record.clone();
            tasks.spawn(async move {
                let result = future.await;
                record
                    .lock()
                    .record(sent_at, sent_at.elapsed(), result, restarting);
            });
            sent += 1;
        }
        load.record.lock().sent = sent;
    }
    load.sending_done
        .store(true, std::sync::atomic::Ordering::Relaxed);
    while tasks.join_next().await.is_some() {}
    load.finished
        .store(true, std::sync::atomic::Ordering::Relaxed);
    // Observers may still hold the handle: take the record out rather than unwrap.
    let mut record = std::mem::replace(
        &mut *load.record.lock(),
        LoadRecord::new(started, options.duration),
    );
    record.finish_seconds();
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls that take 5 s each at 1 000 req/s for 1 s: only `max_outstanding` leave;
    /// the rest fail as not sent and record no latency.
    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_bound_are_not_sent() {
        let options = LoadOptions {
            max_outstanding: 100,
            ..LoadOptions::new(1_000, Duration::from_secs(1))
        };
        let record = run(
            options,
            |_| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok("provider".to_owned())
            },
            |_| {},
        )
        .await;
        assert_eq!(record.sent, 1_000);
        assert_eq!(record.succeeded, 100);
        assert_eq!(record.not_sent, 900);
        assert_eq!(record.failed_by_code.get("ResourceExhausted"), Some(&900));
        assert_eq!(
            record.steady.len(),
            100,
            "not-sent requests have no latency"
        );
        // The histogram keeps 3 significant digits: compare at its precision.
        let five_s = 5_000_000;
        assert!(
            record.steady.equivalent(record.steady.min(), five_s),
            "each sent call took 5 s"
        );
    }

    /// Under the bound every request is sent on schedule.
    #[tokio::test(start_paused = true)]
    async fn every_request_leaves_under_the_bound() {
        let record = run(
            LoadOptions::new(1_000, Duration::from_secs(2)),
            |_| async {
                tokio::time::sleep(Duration::from_millis(3)).await;
                Ok("provider".to_owned())
            },
            |_| {},
        )
        .await;
        assert_eq!(record.sent, 2_000);
        assert_eq!(record.succeeded, 2_000);
        assert_eq!(record.not_sent, 0);
        assert_eq!(record.seconds.len(), 2);
    }

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
