//! The rolling-deploy tool of the `rpc` examples as a library, so the integration tests
//! run the same code as the binary. The demo providers, the load generator and the
//! logging set-up the examples use live in `rpc-testkit`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod rolling;
