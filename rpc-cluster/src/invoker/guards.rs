//! What an attempt holds on its invoker while it runs: guards that count it (in flight,
//! unanswered) or keep the instance out of the picks (suspected), undone when dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Invoker;

/// Counts one call as unanswered on an invoker until dropped.
#[derive(Debug)]
pub(crate) struct Unanswered {
    pub(super) invoker: Arc<Invoker>,
    pub(super) since_us: u64,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        self.invoker.unanswered.fetch_sub(1, Ordering::Relaxed);
        self.invoker
            .unanswered_since_us
            .fetch_sub(self.since_us, Ordering::Relaxed);
    }
}

/// Keeps an invoker from being picked while an overdue call's PING is out.
#[derive(Debug)]
pub(crate) struct Suspicion {
    pub(super) invoker: Arc<Invoker>,
}

impl Drop for Suspicion {
    fn drop(&mut self) {
        self.invoker.health.unsuspect();
    }
}

/// Counts one call in flight on an invoker until dropped.
#[derive(Debug)]
pub(crate) struct ActiveCall {
    pub(super) invoker: Arc<Invoker>,
}

/// A call is active until its response body ends (a stream until its last message).
impl rpc_core::BodyGuard for ActiveCall {}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        let before = self.invoker.active.fetch_sub(1, Ordering::SeqCst);
        self.invoker.report_active();
        if before == 1 && self.invoker.is_removed() {
            self.invoker.idle.notify_waiters();
        }
    }
}
