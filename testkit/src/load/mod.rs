//! An open-loop load generator: requests leave on schedule at a fixed rate whether or
//! not earlier ones have finished, so a stalled server shows up as latency and
//! failures, not as a politely slower client (no coordinated omission).
//!
//! Requests still waiting for an answer are bounded by [`LoadOptions::max_outstanding`]:
//! a rate the system cannot absorb would otherwise hold ever more calls in memory until
//! the kernel ends the process. A request due while the bound is reached is not sent and
//! counts as failed with `RESOURCE_EXHAUSTED` (and as not sent), so the run still fails
//! and says why.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::{Instant, MissedTickBehavior};

mod record;

pub use record::{CallResult, LoadRecord, OPEN_SECONDS, Second};

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
                // Every request still due now finds the same limit: counted at once, so a
                // burst's work is bounded by the limit whatever the rate, and the task
                // yields at the next tick (a signal can end the run).
                let count = due - sent;
                sent = due;
                load.record
                    .lock()
                    .record_not_sent(sent, count, sent_at, &not_sent);
                break;
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

    /// A rate no machine sends (u32::MAX req/s): every request beyond the bound is
    /// counted as not sent, and the run still yields at each tick, so that whatever
    /// waits beside it (a signal, in the binaries' `select!`) ends it. Counted one by one,
    /// the not-sent requests took billions of turns of a loop that never yielded: the
    /// binaries ran minutes past `--duration` and did not hear SIGTERM.
    #[tokio::test(start_paused = true)]
    async fn a_rate_beyond_any_machine_is_counted_and_leaves_room_for_a_signal() {
        let options = || LoadOptions {
            max_outstanding: 100,
            ..LoadOptions::new(u32::MAX, Duration::from_secs(1))
        };
        let slow = |_| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok("provider".to_owned())
        };
        let interrupted = tokio::select! {
            _ = run(options(), slow, |_| {}) => false,
            () = tokio::time::sleep(Duration::from_millis(100)) => true,
        };
        assert!(interrupted, "a wait beside the run ends it before its end");
        let record = run(options(), slow, |_| {}).await;
        let total = u64::from(u32::MAX);
        assert_eq!(record.sent, total);
        assert_eq!(record.succeeded, 100);
        assert_eq!(record.not_sent, total - 100);
        assert_eq!(
            record.failed_by_code.get("ResourceExhausted"),
            Some(&(total - 100))
        );
    }
}
