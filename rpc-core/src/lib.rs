//! # rpc-core
//!
//! The vocabulary every crate of `rpc` shares, the gRPC transport, and the lifecycle
//! manager that makes online and offline lossless.
//!
//! - [`ServiceKey`], [`Instance`]: what is registered and referenced.
//! - [`Registry`]: the trait every registry backend implements (`rpc-registry` has them).
//! - [`transport`]: export tonic services on a listener; dial one instance.
//! - [`Lifecycle`]: start-up order, the seven-step shutdown sequence, phases, signals.
//! - [`InflightCounter`], [`RequestClock`]: what the shutdown sequence waits on.
//! - [`ProviderHandles`], [`ConsumerHandles`]: the narrow view of the lifecycle the
//!   request-path filters get ([`PhaseReader`], the counters, [`RejectionCounter`],
//!   [`OfflineServices`]).
//! - [`metadata`]: the headers providers and consumers exchange (closing mark, ...).
//!
//! This crate knows no concrete registry, load balancer or filter.

// `deny`, not `forbid`: the one module that adopts inherited file descriptors (`fd`)
// allows it, and says why; tests/unsafe_scope.rs checks that no other file does.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod activity;
mod fd;
mod guarded_body;
mod inflight;
mod instance;
pub mod lifecycle;
pub mod metadata;
mod offline_services;
pub mod process;
pub mod registry;
mod rejections;
mod service_key;
pub mod transport;

pub use activity::RequestClock;
pub use guarded_body::GuardedBody;
pub use inflight::{InflightCounter, InflightGuard};
pub use instance::{DEFAULT_WEIGHT, Instance, InstanceId, format_authority};
pub use lifecycle::{
    ConsumerHandles, Lifecycle, Phase, PhaseReader, ProviderHandles, ShutdownConfig, ShutdownReport,
};
pub use offline_services::OfflineServices;
pub use registry::{
    BoxError, Registry, RegistryError, Snapshot, SnapshotOrigin, Subscription, SubscriptionId,
    Unreachability,
};
pub use rejections::RejectionCounter;
pub use service_key::ServiceKey;
