//! gRPC's interoperability tests (`doc/interop-test-descriptions.md` in the grpc
//! repository), run through the cluster: the server is an `rpc` provider
//! ([`server::provide`]), the client calls through a reference ([`client`]), so
//! streaming, metadata, deadlines, cancellation and compression are checked on the
//! path real applications use, against our own peer and against grpcio.
//!
//! The binaries `interop-server` and `interop-client` wrap this module; the tests in
//! `tests/tests/interop.rs` run it in three pairings (ours → ours, grpcio → ours,
//! ours → grpcio).

pub mod case;
mod checks;
pub mod client;
mod duplex;
pub mod echo;
pub mod message_flags;
mod messages;
pub mod procedures;
pub mod server;
pub mod service;
