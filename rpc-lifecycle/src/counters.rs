//! What the request path counts for the shutdown sequence: requests in flight both ways,
//! when the last inbound one arrived, and how many were refused. The filters hold clones
//! of these handles ([`crate::Lifecycle::provider_handles`]); the steps read them.

use rpc_core::{InflightCounter, RejectionCounter, RequestClock};

/// The counters of one application (each a cheap, shared handle).
#[derive(Default)]
pub(crate) struct RequestCounters {
    /// Inbound requests in flight, until their response body ends (step 4 drains it).
    pub(crate) inbound: InflightCounter,
    /// Outbound calls in flight, until their response body ends (step 5 drains it).
    pub(crate) outbound: InflightCounter,
    /// When the latest inbound request arrived (ends step 2 early).
    pub(crate) requests: RequestClock,
    /// Inbound requests refused as "closing, not executed".
    pub(crate) rejections: RejectionCounter,
}
