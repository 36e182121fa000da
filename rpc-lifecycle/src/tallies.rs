//! What observers (metrics, the admin endpoint) may read of a lifecycle beyond its phase
//! and counters: every read here is a few atomic loads or one short lock, never a wait,
//! so a scrape can call them at any moment, during a shutdown included.

use rpc_transport::ConnectionCounts;

use crate::Lifecycle;

impl Lifecycle {
    /// Inbound requests refused as "closing, not executed" so far (shutdown step 3 on).
    pub fn rejected(&self) -> u64 {
        self.inner.counters.rejections.count()
    }

    /// The connections of every server this lifecycle started, summed: those open now,
    /// and the GOAWAYs sent so far. Servers closed by shutdown still count, so the
    /// GOAWAY count never goes back.
    pub fn connection_counts(&self) -> ConnectionCounts {
        self.inner.protocols.connection_counts()
    }
}
