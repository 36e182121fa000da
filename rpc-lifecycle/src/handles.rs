//! The narrow views of this lifecycle that the request-path filters get
//! ([`ProviderHandles`], [`ConsumerHandles`], defined in lossless-rpc-core with the
//! words they hold): built once per export or reference, never per request.

use rpc_core::{ConsumerHandles, ProviderHandles};

use super::Lifecycle;

impl Lifecycle {
    /// The handles the provider filter needs: phase reader, inbound counter, request
    /// clock, rejection counter and manual offline set of this lifecycle. Built once per
    /// export, not per request.
    pub fn provider_handles(&self) -> ProviderHandles {
        let counters = &self.inner.counters;
        ProviderHandles {
            phase: self.inner.phase.reader(),
            inbound: counters.inbound.clone(),
            requests: counters.requests.clone(),
            rejections: counters.rejections.clone(),
            offline: self.inner.registrations.offline().clone(),
            streams: self.inner.streams.clone(),
        }
    }

    /// The handles the consumer filter needs: phase reader and outbound counter of this
    /// lifecycle. Built once per reference, not per call.
    pub fn consumer_handles(&self) -> ConsumerHandles {
        ConsumerHandles {
            phase: self.inner.phase.reader(),
            outbound: self.inner.counters.outbound.clone(),
        }
    }
}
