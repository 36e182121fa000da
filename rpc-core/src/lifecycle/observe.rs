//! What observers (metrics, the admin endpoint) may read of a lifecycle beyond its phase
//! and counters: every read here is a few atomic loads or one short lock, never a wait,
//! so a scrape can call them at any moment, during a shutdown included.

use super::{Lifecycle, ShutdownReport, StepReport};
use crate::transport::ConnectionCounts;

impl Lifecycle {
    /// Inbound requests refused as "closing, not executed" so far (shutdown step 3 on).
    pub fn rejected(&self) -> u64 {
        self.inner.rejections.count()
    }

    /// The connections of every server this lifecycle started, summed: those open now,
    /// and the GOAWAYs sent so far. Servers closed by shutdown still count, so the
    /// GOAWAY count never goes back.
    pub fn connection_counts(&self) -> ConnectionCounts {
        self.inner
            .served
            .lock()
            .iter()
            .map(|server| server.connection_counts())
            .fold(ConnectionCounts::default(), |sum, counts| sum + counts)
    }

    /// The steps of the shutdown taken so far, in order, each with its duration and
    /// outcome: empty before shutdown, growing while it runs, all seven once it ended.
    pub fn shutdown_steps(&self) -> Vec<StepReport> {
        self.inner.shutdown_steps.lock().clone()
    }

    /// The report of the finished shutdown, if one has finished.
    pub fn shutdown_report(&self) -> Option<ShutdownReport> {
        self.inner.finished.borrow().clone()
    }
}
