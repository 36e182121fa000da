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

    /// Runs every pending callback in order, each in its own task so a panic is caught,
    /// each bounded by `deadline`. Returns how many panicked or ran out of time.
    pub(crate) async fn run_all(&self, deadline: Instant) -> usize {
        let callbacks = std::mem::take(&mut *self.pending.lock());
        let mut failed = 0;
        for (index, callback) in callbacks.into_iter().enumerate() {
            let task = tokio::spawn(callback());
            let abort = task.abort_handle();
            match tokio::time::timeout_at(deadline, task).await {
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
