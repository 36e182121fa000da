//! The provider's concurrency limit, read at scrape time.

use std::fmt;

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use rpc_filter::limit::ConcurrencyLimiter;

use super::scrape::{counter, gauge};

/// Writes, on each scrape, once the provider's limit is installed (`provider.limit`):
/// - `rpc_server_concurrency_limit`: the current adaptive limit on inbound requests;
/// - `rpc_server_limited_in_flight`: requests holding a place under it;
/// - `rpc_server_rejected_overload_total`: requests refused at the limit, not executed
///   (`RESOURCE_EXHAUSTED`, `rpc-not-executed: overloaded`).
#[derive(Debug, Default)]
pub(super) struct LimitCollector {
    limiter: RwLock<Option<ConcurrencyLimiter>>,
}

impl LimitCollector {
    /// Reads `limiter` from now on.
    pub(super) fn set(&self, limiter: ConcurrencyLimiter) {
        *self.limiter.write() = Some(limiter);
    }
}

impl Collector for LimitCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(limiter) = self.limiter.read().clone() else {
            return Ok(());
        };
        gauge(
            &mut encoder,
            "rpc_server_concurrency_limit",
            "The provider's adaptive limit on inbound requests in flight.",
            limiter.limit(),
        )?;
        gauge(
            &mut encoder,
            "rpc_server_limited_in_flight",
            "Inbound requests holding a place under the concurrency limit.",
            limiter.inflight(),
        )?;
        counter(
            &mut encoder,
            "rpc_server_rejected_overload",
            "Inbound requests refused at the concurrency limit, not executed.",
            limiter.refused(),
        )
    }
}

#[cfg(test)]
mod tests {
    use rpc_filter::limit::GradientConfig;

    use super::*;
    use crate::observe::scrape::encode_one;

    #[test]
    fn nothing_until_a_limit_is_installed_then_its_figures() {
        let collector = LimitCollector::default();
        assert!(!encode_one(LimitCollector::default()).contains("rpc_server_concurrency"));
        let mut gradient = GradientConfig::default();
        gradient.initial_limit = 1;
        gradient.min_limit = 1;
        let limiter = ConcurrencyLimiter::new(gradient);
        let _held = limiter.try_acquire();
        assert!(limiter.try_acquire().is_none());
        collector.set(limiter);
        let text = encode_one(collector);
        assert!(text.contains("rpc_server_concurrency_limit 1\n"), "{text}");
        assert!(text.contains("rpc_server_limited_in_flight 1\n"), "{text}");
        assert!(
            text.contains("rpc_server_rejected_overload_total 1\n"),
            "{text}"
        );
    }
}
