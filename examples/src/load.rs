//! An open-loop load generator: requests leave on schedule at a fixed rate whether or
//! not earlier ones have finished, so a stalled server shows up as latency and
//! failures, not as a politely slower client (no coordinated omission).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tokio::time::{Instant, MissedTickBehavior};

/// Result of one call: the provider that answered, or the status it failed with.
pub type CallResult = Result<String, tonic::Status>;

/// What to send.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Requests per second.
    pub rate: u32,
    /// How long to send.
    pub duration: Duration,
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
    /// 99th percentile latency of this second's requests, in ms.
    pub p99_ms: f64,
}

/// Everything recorded during a run.
#[derive(Debug)]
pub struct LoadRecord {
    /// When sending started.
    pub started: Instant,
    /// Requests sent.
    pub sent: u64,
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
    /// Per-second counts, indexed by second since start.
    pub seconds: Vec<Second>,
    second_histograms: Vec<Histogram<u64>>,
    last_second: usize,
}

impl LoadRecord {
    fn new(started: Instant, duration: Duration) -> Self {
        Self {
            last_second: (duration.as_millis().div_ceil(1000) as usize).saturating_sub(1),
            started,
            sent: 0,
            succeeded: 0,
            failed_by_code: BTreeMap::new(),
            failure_samples: Vec::new(),
            by_provider: BTreeMap::new(),
            steady: histogram(),
            during_restart: histogram(),
            seconds: Vec::new(),
            second_histograms: Vec::new(),
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
            self.second_histograms.push(histogram());
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
        let index = self.second(sent_at);
        self.seconds[index].sent += 1;
        let micros = latency.as_micros().max(1) as u64;
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
        let _ = self.second_histograms[index].record(micros);
        self.seconds[index].p99_ms =
            self.second_histograms[index].value_at_quantile(0.99) as f64 / 1000.0;
        let target = if restarting {
            &mut self.during_restart
        } else {
            &mut self.steady
        };
        let _ = target.record(micros);
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("valid histogram bounds")
}

/// A run in progress: shared by the sender, the call tasks and the observer (who may
/// flag restart windows and read progress).
#[derive(Clone)]
pub struct Load {
    record: Arc<Mutex<LoadRecord>>,
    restarting: Arc<std::sync::atomic::AtomicBool>,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

impl Load {
    /// Marks whether an instance is restarting now (latencies go to the "during
    /// restart" histogram).
    pub fn set_restarting(&self, restarting: bool) {
        self.restarting
            .store(restarting, std::sync::atomic::Ordering::Relaxed);
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
        finished: Arc::default(),
    };
    observe(load.clone());
    let mut tasks = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let total = u64::from(options.rate) * options.duration.as_millis() as u64 / 1000;
    let mut sent = 0u64;
    while sent < total {
        ticker.tick().await;
        // As many as the schedule says should have left by now: a late tick sends a
        // burst instead of silently lowering the rate.
        let due =
            (started.elapsed().as_micros() as u64 * u64::from(options.rate) / 1_000_000).min(total);
        while sent < due {
            let future = call(sent);
            let record = load.record.clone();
            let restarting = load.restarting.load(std::sync::atomic::Ordering::Relaxed);
            let sent_at = Instant::now();
            tasks.spawn(async move {
                let result = future.await;
                record
                    .lock()
                    .record(sent_at, sent_at.elapsed(), result, restarting);
            });
            sent += 1;
            while let Some(done) = tasks.try_join_next() {
                let _ = done;
            }
        }
        load.record.lock().sent = sent;
    }
    while tasks.join_next().await.is_some() {}
    load.finished
        .store(true, std::sync::atomic::Ordering::Relaxed);
    // Observers may still hold the handle: take the record out rather than unwrap.
    std::mem::replace(
        &mut *load.record.lock(),
        LoadRecord::new(started, options.duration),
    )
}
