//! The limit algorithm: Netflix concurrency-limits' `Gradient2Limit`, fed one window of
//! samples at a time (as its `WindowedLimit` does), with no knowledge of threads.

use std::time::Duration;

/// The tunables of [`Gradient`], with the defaults of [`GradientConfig::default`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct GradientConfig {
    /// The limit before the first window is measured.
    pub initial_limit: u32,
    /// The limit never goes below this.
    pub min_limit: u32,
    /// The limit never goes above this.
    pub max_limit: u32,
    /// How long one window of samples is (the limit moves at most once per window).
    pub window: Duration,
    /// Fewest samples a window needs before it moves the limit; a window with fewer is
    /// extended.
    pub min_window_samples: u32,
    /// How much the current round-trip time may exceed the long-term one before the limit
    /// shrinks (Gradient2's `rttTolerance`, ≥ 1).
    pub tolerance: f64,
    /// Share of a new estimate that enters the limit per window (Gradient2's
    /// `smoothing`, in (0, 1]).
    pub smoothing: f64,
    /// Requests allowed to queue on top of the estimate: what lets the limit grow while
    /// the round-trip time is flat (Gradient2's `queueSize`).
    pub queue_size: u32,
    /// Windows the long-term round-trip time averages over (Gradient2's `longWindow`).
    pub long_window: u32,
}

impl Default for GradientConfig {
    fn default() -> Self {
        Self {
            initial_limit: 100,
            min_limit: 50,
            max_limit: 1_000,
            window: Duration::from_millis(100),
            min_window_samples: 10,
            tolerance: 1.5,
            smoothing: 0.2,
            queue_size: 4,
            long_window: 600,
        }
    }
}

/// Windows averaged plainly before the long-term average turns exponential, so the
/// first samples are not weighed by a start value that means nothing (concurrency-limits'
/// `ExpAvgMeasurement` warm-up).
const WARMUP_WINDOWS: u32 = 10;

/// What one window measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowSample {
    /// The mean round-trip time of the requests that ended in the window.
    pub rtt: Duration,
    /// The most requests in flight at once in the window.
    pub max_inflight: u32,
}

/// The gradient limit: after each window,
///
/// ```text
/// long     = exponential average of the windows' mean RTT over `long_window` windows
///            (cut by 5 % a window while it is more than twice the current RTT, so that
///            it recovers quickly after a long overload)
/// gradient = clamp(tolerance × long / current, 0.5, 1.0)
/// estimate = limit × gradient + queue_size
/// limit    = clamp(limit × (1 − smoothing) + estimate × smoothing, min, max)
/// ```
///
/// unless the window used less than half of the limit (the application, not the
/// provider, limits the load: nothing was learnt about the limit). A flat RTT keeps the
/// gradient at 1 and the limit grows by `smoothing × queue_size` a window; an RTT rising
/// beyond `tolerance ×` its long-term value shrinks it, by at most half a window before
/// smoothing. While the RTT stays high the limit settles near `queue_size / (1 −
/// gradient)` (8 with a gradient of 0.5) unless `min_limit` is higher.
#[derive(Clone, Debug)]
pub struct Gradient {
    config: GradientConfig,
    limit: f64,
    long_rtt: f64,
    windows: u32,
}

impl Gradient {
    /// A limit at `config.initial_limit` (kept within `[min_limit, max_limit]`).
    pub fn new(config: GradientConfig) -> Self {
        let limit = f64::from(
            config
                .initial_limit
                .clamp(config.min_limit, config.max_limit.max(config.min_limit)),
        );
        Self {
            config,
            limit,
            long_rtt: 0.0,
            windows: 0,
        }
    }

    /// The current limit, in whole requests.
    pub fn limit(&self) -> u32 {
        // Within [min, max] of u32 values: the cast cannot truncate.
        self.limit.round() as u32
    }

    /// The long-term round-trip time, once a window was measured.
    pub fn long_rtt(&self) -> Option<Duration> {
        (self.windows > 0).then(|| Duration::from_secs_f64(self.long_rtt))
    }

    /// Moves the limit after a window that measured `sample`; returns the new limit.
    pub fn update(&mut self, sample: WindowSample) -> u32 {
        let short = sample.rtt.as_secs_f64().max(1e-9);
        self.windows = self.windows.saturating_add(1);
        if self.windows <= WARMUP_WINDOWS {
            self.long_rtt += (short - self.long_rtt) / f64::from(self.windows);
        } else {
            let factor = 2.0 / (f64::from(self.config.long_window) + 1.0);
            self.long_rtt = self.long_rtt * (1.0 - factor) + short * factor;
        }
        if self.long_rtt / short > 2.0 {
            self.long_rtt *= 0.95;
        }
        if f64::from(sample.max_inflight) < self.limit / 2.0 {
            return self.limit();
        }
        let gradient = (self.config.tolerance * self.long_rtt / short).clamp(0.5, 1.0);
        let estimate = self.limit * gradient + f64::from(self.config.queue_size);
        let smoothing = self.config.smoothing;
        let limit = self.limit * (1.0 - smoothing) + estimate * smoothing;
        self.limit = limit.clamp(
            f64::from(self.config.min_limit),
            f64::from(self.config.max_limit.max(self.config.min_limit)),
        );
        self.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GradientConfig {
        GradientConfig {
            initial_limit: 20,
            min_limit: 10,
            max_limit: 60,
            ..GradientConfig::default()
        }
    }

    fn busy(gradient: &Gradient, rtt_ms: u64) -> WindowSample {
        WindowSample {
            rtt: Duration::from_millis(rtt_ms),
            max_inflight: gradient.limit(),
        }
    }

    #[test]
    fn a_flat_rtt_under_full_use_grows_the_limit_up_to_the_maximum() {
        let mut gradient = Gradient::new(config());
        let mut last = gradient.limit();
        for _ in 0..20 {
            let limit = gradient.update(busy(&gradient, 10));
            assert!(limit >= last, "{limit} < {last}");
            last = limit;
        }
        assert!(last > 20, "grew: {last}");
        for _ in 0..1_000 {
            gradient.update(busy(&gradient, 10));
        }
        assert_eq!(gradient.limit(), 60);
    }

    #[test]
    fn a_rising_rtt_shrinks_the_limit_down_to_the_minimum() {
        let mut gradient = Gradient::new(config());
        for _ in 0..30 {
            gradient.update(busy(&gradient, 10));
        }
        let before = gradient.limit();
        let after = gradient.update(busy(&gradient, 40));
        assert!(after < before, "{after} >= {before}");
        // Over some 600 windows the long-term RTT makes a lasting RTT the new normal;
        // within 30 the limit is down to its minimum.
        for _ in 0..30 {
            gradient.update(busy(&gradient, 200));
        }
        assert_eq!(gradient.limit(), 10);
    }

    #[test]
    fn a_window_that_uses_under_half_the_limit_moves_nothing() {
        let mut gradient = Gradient::new(config());
        for rtt in [10, 500, 10, 900] {
            let idle = WindowSample {
                rtt: Duration::from_millis(rtt),
                max_inflight: 3,
            };
            assert_eq!(gradient.update(idle), 20);
        }
    }

    #[test]
    fn the_long_rtt_recovers_after_an_overload_ends() {
        let mut gradient = Gradient::new(config());
        for _ in 0..100 {
            gradient.update(busy(&gradient, 100));
        }
        // Back to 10 ms: the long-term RTT falls fast (5 % a window on top of the
        // average) and the limit grows again.
        for _ in 0..100 {
            gradient.update(busy(&gradient, 10));
        }
        assert!(gradient.long_rtt().unwrap() < Duration::from_millis(25));
        let before = gradient.limit();
        assert!(gradient.update(busy(&gradient, 10)) >= before);
    }

    #[test]
    fn the_initial_limit_is_kept_within_the_bounds() {
        let over = GradientConfig {
            initial_limit: 500,
            ..config()
        };
        assert_eq!(Gradient::new(over).limit(), 60);
        let under = GradientConfig {
            initial_limit: 1,
            ..config()
        };
        assert_eq!(Gradient::new(under).limit(), 10);
    }
}
