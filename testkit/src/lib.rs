//! # rpc-testkit
//!
//! What the examples, the cross-crate tests and the benchmarks of `rpc` share, kept out
//! of the framework: none of `rpc-core`, `rpc-registry`, `rpc-cluster`, `rpc-filter`,
//! `rpc` or `proto` depends on this crate. It uses the generated stubs (`proto`) and,
//! for the interop client and server, `rpc` itself.
//!
//! - [`load`]: the open-loop load generator (fixed rate, no coordinated omission,
//!   bounded requests in flight) and the record of a run.
//! - [`services`]: the demo providers, [`services::GreeterProvider`] and
//!   [`services::EchoProvider`].
//! - [`interop`]: gRPC's interop test service, served by an `rpc` provider, and the
//!   interop client calling through an `rpc` reference (the `interop-server` and
//!   `interop-client` examples and the interop tests run this code).
//! - [`peers`]: peers that never finish a graceful HTTP/2 close (mute, half-closed,
//!   ignoring GOAWAY, silent, idle), for shutdown tests and benchmarks.
//! - [`measure`]: the latency histogram every measurement uses, throughput and
//!   percentiles of a run, medians of repeated runs.
//! - [`init_logging`]: the `tracing` subscriber the example binaries install.
//! - [`http`]: a small HTTP/1.1 client for the admin endpoint (`GET /ready`, `POST
//!   /offline`).
//! - [`registry_server`]: an etcd, ZooKeeper or rnacos server process a test owns, to
//!   stop and restart on the same port (registry outages), killed on drop.
//! - [`tls`]: a test CA and the certificates it signs, as PEM files.
//! - [`external`]: what a test needs from outside (Python, the Kubernetes validator),
//!   required in CI by `RPC_TEST_REQUIRE_*`, skipped with one line elsewhere.
//! - [`netlab`]: hosts as network namespaces, with faults (blackhole, a cut between two
//!   hosts, loss) as nftables rules, for fault tests across hosts.
//! - [`wire`]: bad input on the wire (raw HTTP/2 frames, hand-written gRPC calls, the
//!   rapid-reset, header-list and CONTINUATION floods).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod echo_calls;
pub mod external;
pub mod feed;
pub mod http;
pub mod interop;
pub mod load;
mod logging;
pub mod measure;
pub mod netlab;
pub mod peers;
pub mod registry_server;
pub mod services;
pub mod tls;
pub mod wire;

pub use logging::init_logging;
