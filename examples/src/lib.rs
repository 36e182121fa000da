//! The rolling-deploy tool and gRPC's interop test server and client of the `rpc`
//! examples as a library, so the integration tests run the same code as the binaries,
//! and how the example providers run as processes. The demo providers, the load
//! generator and the logging set-up the examples use live in `rpc-testkit`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod interop;
pub mod rolling;
pub mod serving;
