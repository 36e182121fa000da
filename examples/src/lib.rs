//! The rolling-deploy tool of the `lossless-rpc` examples as a library, so the
//! integration tests run the same code as the binary, and how the example providers run
//! as processes. The demo providers, gRPC's interop test service and client, the load
//! generator and the logging set-up the examples use live in `rpc-testkit`.
//! [`bearer_auth`] shows a tower layer of an application's own on both sides of a call.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bearer_auth;
pub mod hot_upgrade;
pub mod rolling;
pub mod serving;
