//! The failback queue: failed calls retried in the background, a bounded number at once.
//!
//! It knows nothing of calls. The runner hands it a [`RetryJob`] — one failed call
//! that can try itself again — and the queue owns the timing: wait `retry_period`,
//! let the job try, at most `retries` times, and drop it (logged) after that. When
//! `queue_capacity` jobs are waiting, a new one is dropped at once (logged), so a
//! dependency that is down cannot make failback hold an unbounded number of requests.
//! Closing the queue (shutdown) drops every job still waiting.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::FailbackConfig;

/// What one background try of a job came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retried {
    /// The call went through (or got an answer meant for its caller): the job is done.
    Done,
    /// It failed; it may try again after the next period.
    Failed,
    /// It failed and cannot be sent again (its body is gone): the job is dropped.
    Spent,
}

/// A failed call that can try itself again.
pub(crate) trait RetryJob: Send + 'static {
    /// Tries the call once more.
    fn retry(&mut self) -> BoxFuture<'_, Retried>;
}

/// The calls of one reference waiting for a background retry.
#[derive(Debug)]
pub(crate) struct FailbackQueue {
    config: FailbackConfig,
    capacity: usize,
    slots: Arc<Semaphore>,
    closed: CancellationToken,
}

impl FailbackQueue {
    /// An empty queue with `config`'s period, retries and capacity.
    pub(crate) fn new(config: FailbackConfig) -> Self {
        // A semaphore holds at most MAX_PERMITS; a larger capacity means "unbounded".
        let capacity = config.queue_capacity.min(Semaphore::MAX_PERMITS);
        Self {
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
            closed: CancellationToken::new(),
            config,
        }
    }

    /// Calls waiting for a retry.
    pub(crate) fn len(&self) -> usize {
        self.capacity - self.slots.available_permits()
    }

    /// Queues `job`: it is tried every `retry_period`, up to `retries` times, until it
    /// is done. False (and the job dropped, logged) when the queue is full or closed.
    pub(crate) fn enqueue(&self, job: impl RetryJob) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            tracing::error!(
                capacity = self.capacity,
                "failback queue full; request dropped"
            );
            return false;
        };
        let closed = self.closed.clone();
        let config = self.config.clone();
        tokio::spawn(async move {
            let _slot = slot;
            tokio::select! {
                _ = closed.cancelled() => {}
                _ = retry(job, &config) => {}
            }
        });
        true
    }

    /// Drops every queued call (shutdown); later calls are not queued.
    pub(crate) fn close(&self) {
        self.closed.cancel();
    }
}

/// Tries `job` every period until it is done, spent, or out of retries.
async fn retry(mut job: impl RetryJob, config: &FailbackConfig) {
    for round in 1..=config.retries {
        tokio::time::sleep(config.retry_period).await;
        match job.retry().await {
            Retried::Done => {
                tracing::info!(round, "failback: background retry succeeded");
                return;
            }
            Retried::Spent => break,
            Retried::Failed => {}
        }
    }
    tracing::error!(
        retries = config.retries,
        "failback: request dropped after its background retries"
    );
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use futures_util::FutureExt;

    use super::*;

    /// A job whose tries are counted and fail until the `succeeds_on`-th.
    struct Counted {
        tries: Arc<AtomicU32>,
        succeeds_on: u32,
    }

    impl RetryJob for Counted {
        fn retry(&mut self) -> BoxFuture<'_, Retried> {
            let tries = self.tries.fetch_add(1, Ordering::SeqCst) + 1;
            let result = if tries == self.succeeds_on {
                Retried::Done
            } else {
                Retried::Failed
            };
            async move { result }.boxed()
        }
    }

    fn config(capacity: usize) -> FailbackConfig {
        FailbackConfig {
            retry_period: Duration::from_secs(5),
            retries: 3,
            queue_capacity: capacity,
        }
    }

    fn job(succeeds_on: u32) -> (Counted, Arc<AtomicU32>) {
        let tries = Arc::new(AtomicU32::new(0));
        let job = Counted {
            tries: tries.clone(),
            succeeds_on,
        };
        (job, tries)
    }

    /// Lets the queue's tasks run up to `by` later (the clock is paused).
    async fn after(by: Duration) {
        tokio::time::sleep(by).await;
        tokio::task::yield_now().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_is_tried_once_per_period_until_it_succeeds() {
        let queue = FailbackQueue::new(config(8));
        let (job, tries) = job(2);
        assert!(queue.enqueue(job));
        assert_eq!(queue.len(), 1);
        after(Duration::from_millis(4_999)).await;
        assert_eq!(tries.load(Ordering::SeqCst), 0, "not before the period");
        after(Duration::from_millis(1)).await;
        assert_eq!(tries.load(Ordering::SeqCst), 1);
        after(Duration::from_secs(5)).await;
        assert_eq!(tries.load(Ordering::SeqCst), 2);
        assert_eq!(queue.len(), 0, "done: its slot is free");
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_is_dropped_after_its_retries() {
        let queue = FailbackQueue::new(config(8));
        let (job, tries) = job(u32::MAX);
        queue.enqueue(job);
        after(Duration::from_secs(60)).await;
        assert_eq!(tries.load(Ordering::SeqCst), 3);
        assert_eq!(queue.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_drops_new_jobs() {
        let queue = FailbackQueue::new(config(2));
        assert!(queue.enqueue(job(1).0));
        assert!(queue.enqueue(job(1).0));
        let (third, tries) = job(1);
        assert!(!queue.enqueue(third));
        assert_eq!(queue.len(), 2);
        after(Duration::from_secs(5)).await;
        assert_eq!(tries.load(Ordering::SeqCst), 0, "the dropped job never ran");
        assert_eq!(queue.len(), 0);
        assert!(queue.enqueue(job(1).0), "room again");
    }

    #[tokio::test(start_paused = true)]
    async fn closing_drops_the_waiting_jobs_and_refuses_new_ones() {
        let queue = FailbackQueue::new(config(8));
        let (job, tries) = job(1);
        queue.enqueue(job);
        queue.close();
        after(Duration::from_secs(60)).await;
        assert_eq!(tries.load(Ordering::SeqCst), 0);
        assert_eq!(queue.len(), 0);
        assert!(!queue.enqueue(self::job(1).0));
    }
}
