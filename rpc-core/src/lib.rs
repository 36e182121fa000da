//! # lossless-rpc-core
//!
//! The vocabulary every crate of `lossless-rpc` shares, and nothing else: no I/O, no
//! sockets, no descriptors, no TLS (those are lossless-rpc-transport's), no sequence
//! (lossless-rpc-lifecycle's).
//!
//! - [`ServiceKey`], [`Instance`]: what is registered and referenced.
//! - [`Registry`]: the trait every registry backend implements (`lossless-rpc-registry`
//!   has them).
//! - [`ManagedReference`]: what the lifecycle drives of a consumer's reference.
//! - [`Phase`], [`PhaseReader`], [`PhaseCell`]: where an application is in its life.
//! - [`InflightCounter`], [`RequestClock`], [`RejectionCounter`], [`OfflineServices`]:
//!   what the shutdown sequence waits on and the request path writes.
//! - [`ProviderHandles`], [`ConsumerHandles`]: the narrow view of the lifecycle the
//!   request-path filters get.
//! - [`StreamDrain`], [`DrainNotice`], [`moved`]: stream handlers told that their instance
//!   goes offline, and the status that ends such a stream as moved.
//! - [`GuardedBody`]: a response body that tells a guard how it ended.
//! - [`metadata`]: the headers providers and consumers exchange (closing mark, ...).
//! - [`Compression`]: how one side's messages are compressed (`none`, `gzip`, `zstd`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod activity;
pub mod byte_size;
mod call_context;
mod compression;
pub mod exported_spans;
mod guarded_body;
mod handles;
mod inflight;
mod instance;
mod managed_reference;
pub mod metadata;
mod offline_services;
mod phase;
pub mod registry;
mod rejections;
pub mod semconv;
mod service_key;
pub mod step_span;
mod stream_drain;
pub mod trace_context;
pub mod triple;

pub use activity::RequestClock;
pub use call_context::CallContext;
pub use compression::Compression;
pub use exported_spans::DeployAction;
pub use guarded_body::{BodyEnd, BodyGuard, GuardedBody};
pub use handles::{ConsumerHandles, ProviderHandles};
pub use inflight::{InflightCounter, InflightGuard};
pub use instance::{DEFAULT_WEIGHT, Instance, InstanceId, format_authority};
pub use managed_reference::ManagedReference;
pub use offline_services::OfflineServices;
pub use phase::{Phase, PhaseCell, PhaseReader};
pub use registry::{
    BoxError, Registry, RegistryError, Snapshot, SnapshotOrigin, Subscription, SubscriptionId,
    Unreachability,
};
pub use rejections::RejectionCounter;
pub use semconv::RpcConventions;
pub use service_key::ServiceKey;
pub use step_span::StepSpan;
pub use stream_drain::{DrainNotice, MOVED_MESSAGE, StreamDrain, is_reserved, moved};
pub use trace_context::TraceContext;
