//! # lossless-rpc-cluster
//!
//! The consumer side of lossless online/offline: layered invokers that keep requests
//! away from instances that are failing, closing or gone.
//!
//! ## The layers, and the file of each
//!
//! A request goes down the layers once and its answer comes back up the same way:
//!
//! ```text
//! ClusterChannel          channel.rs     tonic GrpcService; builds a Call, runs it
//!   → cluster strategy    strategy/*     where attempts go, whether to try again
//!                         call/run.rs    carries it out: retry budget, backoff, race,
//!                                        broadcast, failback hand-off
//!   → Directory           directory.rs   registry snapshots by instance id; empty
//!                                        protection                    (call/pick.rs)
//!   → blacklist           blacklist.rs   ejection policy, closing marks, one probe;
//!                         health.rs      the per-instance state it writes
//!   → LoadBalance         loadbalance/*  random, round-robin, P2C, least-active,
//!                                        consistent hash               (call/pick.rs)
//!   → instance connection invoker/       one HTTP/2 connection per instance (the
//!                                        transport's InstanceConnection), made on
//!                                        first pick              (call/dispatch.rs)
//!   ← learning            call/learn.rs  the result → health, latency, ejection
//! ```
//!
//! What every call of one reference shares — the layers above plus the retry budget
//! (`retry_budget.rs`), the counters (`stats.rs`), the failback queue
//! (`failback_queue.rs`) and the source of each call's random numbers (`rng.rs`) — is
//! one `ReferenceStack` (`stack.rs`). One call across its attempts is a `Call`
//! (`call/mod.rs`). What an attempt's result means is `classify.rs`; a request body kept
//! for replay is `replay.rs`; the caller's deadline over the whole call, streams
//! included, is `call_deadline.rs`; settings are `config/`; the lifecycle's handle on a
//! reference is `reference.rs`; what an attempt tells metrics is `attempt_observer.rs` (its span
//! is made in `call/telemetry.rs`). No file imports one above it: strategies know nothing
//! of calls or channels, and the failback queue nothing of calls.
//!
//! Written here, not taken from tower's balancer, because the behaviour is the product:
//! tower's P2C reports no load through tonic (every endpoint weighs 0, so it is random),
//! and neither tower nor tonic knows a provider's "closing, not executed" answer.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod active_index;
mod attempt_observer;
mod blacklist;
mod call;
mod call_deadline;
mod channel;
mod classify;
pub mod config;
mod directory;
mod error;
mod ewma;
mod failback_queue;
mod fleet_latency;
mod health;
mod id_order;
mod invoker;
mod last_resort;
pub mod loadbalance;
mod reference;
mod replay;
pub mod resume;
mod retry_budget;
mod rng;
pub use rng::seed_this_thread;
mod stack;
mod stats;
mod strategy;

pub use attempt_observer::AttemptObserver;
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
