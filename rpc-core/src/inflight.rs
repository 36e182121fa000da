//! In-flight request counters that the shutdown sequence drains.
//!
//! Counting is done with a guard, never with hand-paired increments: a guard is taken
//! when a request enters and dropped when its *response body ends*, so a stream counts
//! until its last message, and a panic or a cancelled future still decrements (drop runs
//! during unwinding and on cancellation). The count cannot go negative because only a
//! guard can decrement it, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Counts requests in flight and wakes waiters the moment the count reaches zero.
///
/// Cheap to clone (one `Arc`); all clones share the count.
#[derive(Clone, Debug, Default)]
pub struct InflightCounter {
    inner: Arc<InflightCount>,
}

/// The count itself, shared by the counter's clones and its guards.
#[derive(Debug, Default)]
struct InflightCount {
    count: AtomicUsize,
    idle: Notify,
}

impl InflightCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one more request until the returned guard is dropped.
    pub fn acquire(&self) -> InflightGuard {
        // SeqCst pairs with the phase read that follows in the filters (see
        // rpc-filter's graceful module): admission and drain cannot miss each other.
        self.inner.count.fetch_add(1, Ordering::SeqCst);
        InflightGuard {
            inner: self.inner.clone(),
        }
    }

    /// Requests in flight now.
    pub fn current(&self) -> usize {
        self.inner.count.load(Ordering::SeqCst)
    }

    /// Resolves as soon as no request is in flight (at once if none is).
    pub async fn wait_idle(&self) {
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            // Register interest before reading the count, so a guard dropped between
            // the read and the await still wakes us.
            idle.as_mut().enable();
            if self.current() == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Holds one unit of an [`InflightCounter`]; dropping it releases the unit.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while the guard is alive"]
pub struct InflightGuard {
    inner: Arc<InflightCount>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.inner.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn wait_idle_returns_at_once_when_idle() {
        let waited =
            tokio::time::timeout(Duration::from_millis(1), InflightCounter::new().wait_idle())
                .await;
        assert!(waited.is_ok(), "no request in flight: no wait");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_idle_ends_when_last_guard_drops() {
        let counter = InflightCounter::new();
        let a = counter.acquire();
        let b = counter.acquire();
        assert_eq!(counter.current(), 2);
        let waiter = tokio::spawn({
            let counter = counter.clone();
            async move { counter.wait_idle().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(a);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished(), "one request is still in flight");
        drop(b);
        waiter.await.unwrap();
        assert_eq!(counter.current(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn guard_is_released_when_its_task_panics_or_is_cancelled() {
        let counter = InflightCounter::new();
        let panicking = tokio::spawn({
            let guard = counter.acquire();
            async move {
                let _guard = guard;
                panic!("handler panicked");
            }
        });
        assert!(panicking.await.unwrap_err().is_panic());
        let cancelled = tokio::spawn({
            let guard = counter.acquire();
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }
        });
        cancelled.abort();
        assert!(cancelled.await.unwrap_err().is_cancelled());
        assert_eq!(counter.current(), 0);
    }
}
