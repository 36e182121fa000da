//! How many inbound requests were refused as "closing, not executed", for the shutdown
//! report.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts inbound requests refused because the provider is closing (shutdown step 3
/// on). One relaxed atomic add per refusal: the count is read once, for the report,
/// after the drain, and orders nothing.
///
/// Cheap to clone (one `Arc`); all clones share the count.
#[derive(Clone, Debug, Default)]
pub struct RejectionCounter {
    count: Arc<AtomicU64>,
}

impl RejectionCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one refused request.
    pub fn note(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests refused so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_count() {
        let counter = RejectionCounter::new();
        counter.clone().note();
        counter.note();
        assert_eq!(counter.count(), 2);
    }
}
