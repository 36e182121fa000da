//! # rpc-cluster
//!
//! The consumer side of lossless online/offline: layered invokers that keep requests
//! away from instances that are failing, closing or gone.
//!
//! ```text
//! ClusterChannel (tonic GrpcService)
//!   → cluster strategy   (failover: retry only what certainly did not run, budgeted)
//!   → Directory          (registry snapshots by instance id; empty protection)
//!   → blacklist          (outlier ejection, closing marks, one probe after ejection)
//!   → LoadBalance        (random, round-robin, P2C, least-active, consistent hash)
//!   → one tonic Channel per instance, created on first pick
//! ```
//!
//! Written here, not taken from tower's balancer, because the behaviour is the product:
//! tower's P2C reports no load through tonic (every endpoint weighs 0, so it is random),
//! and neither tower nor tonic knows a provider's "closing, not executed" answer.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod blacklist;
mod call;
mod channel;
mod classify;
pub mod config;
mod directory;
mod error;
mod ewma;
mod health;
mod invoker;
pub mod loadbalance;
mod reference;
mod replay;
mod retry_budget;
mod stats;
mod strategy;

pub use blacklist::{Blacklist, BlacklistCounts, BlacklistStats};
pub use channel::ClusterChannel;
pub use classify::FailureKind;
pub use config::{
    BlacklistConfig, ClusterKind, DirectoryConfig, FailbackConfig, InvalidSetting, LoadBalanceKind,
    MethodConfig, ReferenceConfig, RetryBudgetConfig,
};
pub use directory::{Applied, Directory};
pub use error::ClusterError;
pub use health::Availability;
pub use invoker::{Invoker, InvokerStats};
pub use reference::ClusterReference;
pub use stats::ClusterCounts;
