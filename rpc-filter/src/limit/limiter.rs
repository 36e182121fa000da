//! The shared state of one provider's limit: the in-flight count checked against the
//! limit on every request, the current window's samples, and the [`Gradient`] that moves
//! the limit once per window.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;
use rpc_core::RejectionCounter;
use tokio::time::Instant;

use super::gradient::{Gradient, GradientConfig, WindowSample};

/// An adaptive concurrency limit. Cheap to clone (one `Arc`); clones share the limit.
///
/// The per-request path is atomics only: admission is one add on the in-flight count
/// compared with the limit; a request's end is one subtract and three adds into the
/// window. Whichever request ends first after the window's time is up takes the
/// algorithm's lock with `try_lock` (never waiting: if another request holds it, that
/// one is doing the update) and moves the limit.
#[derive(Clone, Debug)]
pub struct ConcurrencyLimiter {
    state: Arc<LimitState>,
}

/// The limit, the requests under it and the window being measured, held by the
/// limiter and every permit.
#[derive(Debug)]
struct LimitState {
    limit: AtomicU32,
    inflight: AtomicU32,
    /// Requests refused at the limit (the counter the closing refusals use too).
    refused: RejectionCounter,
    window: Window,
    /// Nanoseconds since `epoch` at which the current window may close.
    window_end: AtomicU64,
    epoch: Instant,
    window_nanos: u64,
    min_window_samples: u32,
    gradient: Mutex<Gradient>,
}

/// Samples of the current window.
#[derive(Debug, Default)]
struct Window {
    rtt_nanos: AtomicU64,
    samples: AtomicU32,
    max_inflight: AtomicU32,
}

impl ConcurrencyLimiter {
    /// A limit moved by a [`Gradient`] with `config`, starting at its initial limit.
    pub fn new(config: GradientConfig) -> Self {
        let gradient = Gradient::new(config);
        let window_nanos = u64::try_from(config.window.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        Self {
            state: Arc::new(LimitState {
                limit: AtomicU32::new(gradient.limit()),
                inflight: AtomicU32::new(0),
                refused: RejectionCounter::new(),
                window: Window::default(),
                window_end: AtomicU64::new(window_nanos),
                epoch: Instant::now(),
                window_nanos,
                min_window_samples: config.min_window_samples.max(1),
                gradient: Mutex::new(gradient),
            }),
        }
    }

    /// Admits one request if fewer than the limit are in flight: the returned permit
    /// holds its place until dropped (or [`Permit::finish`]ed) and samples its round-trip
    /// time. `None` (counted as refused) when the limit is reached.
    pub fn try_acquire(&self) -> Option<Permit> {
        let state = &*self.state;
        let before = state.inflight.fetch_add(1, Ordering::AcqRel);
        if before >= state.limit.load(Ordering::Relaxed) {
            state.inflight.fetch_sub(1, Ordering::AcqRel);
            state.refused.note();
            return None;
        }
        Some(Permit {
            state: self.state.clone(),
            started: Instant::now(),
            inflight: before + 1,
        })
    }

    /// The current limit.
    pub fn limit(&self) -> u32 {
        self.state.limit.load(Ordering::Relaxed)
    }

    /// Requests admitted whose permit has not ended.
    pub fn inflight(&self) -> u32 {
        self.state.inflight.load(Ordering::Relaxed)
    }

    /// Requests refused so far because the limit was reached.
    pub fn refused(&self) -> u64 {
        self.state.refused.count()
    }
}

impl LimitState {
    /// Adds one request's round-trip time to the window, and closes the window if its
    /// time is up and it holds enough samples.
    fn record(&self, rtt: std::time::Duration, inflight: u32, now: Instant) {
        let window = &self.window;
        let rtt_nanos = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        window.rtt_nanos.fetch_add(rtt_nanos, Ordering::Relaxed);
        window.max_inflight.fetch_max(inflight, Ordering::Relaxed);
        let samples = window.samples.fetch_add(1, Ordering::Relaxed) + 1;
        let now_nanos = u64::try_from((now - self.epoch).as_nanos()).unwrap_or(u64::MAX);
        if now_nanos < self.window_end.load(Ordering::Relaxed) || samples < self.min_window_samples
        {
            return;
        }
        let Some(mut gradient) = self.gradient.try_lock() else {
            return;
        };
        // Another request may have closed this window while we were getting here.
        if now_nanos < self.window_end.load(Ordering::Relaxed) {
            return;
        }
        let samples = window.samples.swap(0, Ordering::Relaxed);
        let rtt_sum = window.rtt_nanos.swap(0, Ordering::Relaxed);
        let max_inflight = window.max_inflight.swap(0, Ordering::Relaxed);
        self.window_end.store(
            now_nanos.saturating_add(self.window_nanos),
            Ordering::Relaxed,
        );
        if samples == 0 {
            return;
        }
        let sample = WindowSample {
            rtt: std::time::Duration::from_nanos(rtt_sum / u64::from(samples)),
            max_inflight,
        };
        let limit = gradient.update(sample);
        self.limit.store(limit, Ordering::Relaxed);
    }
}

/// One admitted request's place under the limit. Dropping it ends the request: its
/// place is freed and its round-trip time, from admission, enters the window.
#[derive(Debug)]
pub struct Permit {
    state: Arc<LimitState>,
    started: Instant,
    /// Requests in flight just after this one was admitted.
    inflight: u32,
}

impl Permit {
    /// Ends the request now (the same as dropping the permit).
    pub fn finish(self) {}
}

impl Drop for Permit {
    fn drop(&mut self) {
        let now = Instant::now();
        self.state.inflight.fetch_sub(1, Ordering::AcqRel);
        self.state.record(now - self.started, self.inflight, now);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config() -> GradientConfig {
        GradientConfig {
            initial_limit: 12,
            min_limit: 12,
            max_limit: 40,
            window: Duration::from_millis(100),
            min_window_samples: 5,
            ..GradientConfig::default()
        }
    }

    /// Runs `windows` windows in which the limiter is kept full, each request taking
    /// `rtt` on the paused clock; returns the limit after each window.
    async fn run_full(limiter: &ConcurrencyLimiter, windows: usize, rtt: Duration) -> Vec<u32> {
        let mut limits = Vec::new();
        for _ in 0..windows {
            let window_start = Instant::now();
            while Instant::now() - window_start <= Duration::from_millis(100) {
                let permits: Vec<_> = std::iter::from_fn(|| limiter.try_acquire()).collect();
                assert!(!permits.is_empty());
                tokio::time::advance(rtt).await;
                drop(permits);
            }
            limits.push(limiter.limit());
        }
        limits
    }

    #[tokio::test(start_paused = true)]
    async fn requests_over_the_limit_are_refused_and_counted() {
        let limiter = ConcurrencyLimiter::new(config());
        let permits: Vec<_> = (0..12).filter_map(|_| limiter.try_acquire()).collect();
        assert_eq!(permits.len(), 12);
        assert!(limiter.try_acquire().is_none());
        assert_eq!(limiter.refused(), 1);
        assert_eq!(limiter.inflight(), 12);
        drop(permits);
        assert_eq!(limiter.inflight(), 0);
        assert!(limiter.try_acquire().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_flat_rtt_grows_the_limit_and_a_rising_one_shrinks_it_within_bounds() {
        let limiter = ConcurrencyLimiter::new(config());
        let limits = run_full(&limiter, 60, Duration::from_millis(10)).await;
        assert!(limits.windows(2).all(|w| w[1] >= w[0]), "{limits:?}");
        let grown = *limits.last().unwrap();
        assert!(grown > 12, "{limits:?}");
        assert!(grown <= 40);

        let limits = run_full(&limiter, 60, Duration::from_millis(50)).await;
        assert!(limits[0] < grown, "{limits:?}");
        assert!(limits.iter().all(|&l| (12..=40).contains(&l)), "{limits:?}");
        assert_eq!(*limits.last().unwrap(), 12, "{limits:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_with_too_few_samples_is_extended() {
        let limiter = ConcurrencyLimiter::new(config());
        // Four slow requests in a long time: fewer than five samples, no update.
        for _ in 0..4 {
            let permit = limiter.try_acquire().unwrap();
            tokio::time::advance(Duration::from_secs(1)).await;
            permit.finish();
        }
        assert_eq!(limiter.limit(), 12);
    }
}
