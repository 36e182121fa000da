//! What the graceful filters need from the lifecycle, and nothing more ("pass handles,
//! not the world", as linkerd gives a layer a `Param<T>` instead of the whole
//! configuration).
//!
//! A filter holding a [`ProviderHandles`] or [`ConsumerHandles`] can read the phase and
//! count requests, but cannot start a shutdown, move the phase, or reach what the
//! application started. The lifecycle (lossless-rpc-lifecycle) builds them over its own
//! state.

use crate::activity::RequestClock;
use crate::inflight::InflightCounter;
use crate::offline_services::OfflineServices;
use crate::phase::PhaseReader;
use crate::rejections::RejectionCounter;
use crate::stream_drain::StreamDrain;

/// The provider filter's view of the lifecycle: each field is a handle to the same
/// state the shutdown sequence reads, shared, not copied.
#[derive(Clone, Debug)]
pub struct ProviderHandles {
    /// The current phase: whether to mark responses closing (step 1 on) and to refuse
    /// new requests (step 3 on).
    pub phase: PhaseReader,
    /// Inbound requests in flight, until their response body ends (step 4 drains it).
    pub inbound: InflightCounter,
    /// When the latest inbound request arrived since shutdown began (ends step 2 early
    /// once it is quiet; the provider filter notes no request while serving).
    pub requests: RequestClock,
    /// Inbound requests refused as "closing, not executed" (the report's `rejected`).
    pub rejections: RejectionCounter,
    /// The services manually offline: their responses carry the closing mark too.
    pub offline: OfflineServices,
    /// Tells stream handlers that the instance goes offline (a [`crate::DrainNotice`]
    /// in every request's extensions), and counts the streams that ended as moved.
    pub streams: StreamDrain,
}

/// The consumer filter's view of the lifecycle.
#[derive(Clone, Debug)]
pub struct ConsumerHandles {
    /// The current phase: whether new outbound calls are refused (step 6 on).
    pub phase: PhaseReader,
    /// Outbound calls in flight, until their response body ends (step 5 drains it).
    pub outbound: InflightCounter,
}
