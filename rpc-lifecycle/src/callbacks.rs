//! The application's shutdown callbacks (step 7).

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use tokio::time::Instant;

type Callback = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// Callbacks in registration order; taken out when run, so each runs at most once.
#[derive(Default)]
pub(crate) struct Callbacks {
    pending: Mutex<Vec<Callback>>,
}

impl Callbacks {
    pub(crate) fn push(&self, callback: Callback) {
        self.pending.lock().push(callback);
    }

    /// Whether no callback is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.lock().is_empty()
    }

    /// Runs every pending callback in order, each in its own task so a panic is caught,
    /// all of them by `deadline`. Each callback may use an equal share of the time left
    /// when it starts (what is left divided by the callbacks left): one that hangs cannot
    /// take the time of those after it, so every callback runs; one that finishes early
    /// leaves its time to the next. Returns how many panicked or ran out of time.
    pub(crate) async fn run_all(&self, deadline: Instant) -> usize {
        let callbacks = std::mem::take(&mut *self.pending.lock());
        let count = callbacks.len();
        let mut failed = 0;
        for (index, callback) in callbacks.into_iter().enumerate() {
            let now = Instant::now();
            let left = u32::try_from(count - index).unwrap_or(u32::MAX);
            let share = now + deadline.saturating_duration_since(now) / left;
            let task = tokio::spawn(callback());
            let abort = task.abort_handle();
            match tokio::time::timeout_at(share, task).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    failed += 1;
                    tracing::error!(callback = index, %error, "shutdown callback panicked");
                }
                Err(_) => {
                    failed += 1;
                    abort.abort();
                    tracing::error!(callback = index, "shutdown callback ran out of time");
                }
            }
        }
        failed
    }

    /// Drops every pending callback without running it (after a second signal).
    pub(crate) fn discard(&self) -> usize {
        std::mem::take(&mut *self.pending.lock()).len()
    }
}
