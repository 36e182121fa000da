//! # rpc-testkit
//!
//! What the examples, the cross-crate tests and the benchmarks of `rpc` share, kept out
//! of the framework: none of `rpc-core`, `rpc-registry`, `rpc-cluster`, `rpc-filter`,
//! `rpc` or `proto` depends on this crate, and it depends on none of them but the
//! generated stubs (`proto`).
//!
//! - [`load`]: the open-loop load generator (fixed rate, no coordinated omission,
//!   bounded requests in flight) and the record of a run.
//! - [`services`]: the demo providers, [`services::GreeterProvider`] and
//!   [`services::EchoProvider`].
//! - [`measure`]: the latency histogram every measurement uses, throughput and
//!   percentiles of a run, medians of repeated runs.
//! - [`init_logging`]: the `tracing` subscriber the example binaries install.
//! - [`http`]: a small HTTP/1.1 client for the admin endpoint (`GET /ready`, `POST
//!   /offline`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod http;
pub mod load;
mod logging;
pub mod measure;
pub mod services;

pub use logging::init_logging;
