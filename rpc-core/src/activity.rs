//! When the last inbound request arrived, for the "no request during the offline window"
//! condition of the shutdown sequence.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

/// Records the arrival time of the latest inbound request. One relaxed load (and a store
/// when the time moved on) per request; the time comes from tokio's clock so paused-time tests control it.
#[derive(Clone, Debug)]
pub struct RequestClock {
    inner: Arc<LastRequest>,
}

/// When the last request arrived, as an offset from the clock's origin.
#[derive(Debug)]
struct LastRequest {
    origin: Instant,
    /// Nanoseconds after `origin` of the last request, plus one; 0 means "none yet".
    last: AtomicU64,
}

impl Default for RequestClock {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestClock {
    /// A clock that has seen no request.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(LastRequest {
                origin: Instant::now(),
                last: AtomicU64::new(0),
            }),
        }
    }

    /// Notes that a request arrived now.
    pub fn touch(&self) {
        let nanos = Instant::now()
            .saturating_duration_since(self.inner.origin)
            .as_nanos() as u64;
        // A load and a compare, not `fetch_max`: this runs on every request, and a
        // read-modify-write of one atomic shared by every core is what made it cost. Two
        // requests racing may leave the earlier of their times, nanoseconds apart, which
        // the offline window (milliseconds) cannot tell.
        if self.inner.last.load(Ordering::Relaxed) <= nanos {
            self.inner.last.store(nanos + 1, Ordering::Relaxed);
        }
    }

    /// When the latest request arrived, if any has.
    pub fn last(&self) -> Option<Instant> {
        match self.inner.last.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.inner.origin + std::time::Duration::from_nanos(n - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn remembers_the_latest_request() {
        let clock = RequestClock::new();
        assert!(clock.last().is_none());
        tokio::time::advance(Duration::from_millis(5)).await;
        clock.touch();
        let first = clock.last().unwrap();
        tokio::time::advance(Duration::from_millis(5)).await;
        clock.touch();
        assert_eq!(clock.last().unwrap() - first, Duration::from_millis(5));
    }
}
