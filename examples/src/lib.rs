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

/// A command-line duration (`50s`, `500ms`, `2m`) for the binaries' flags, with an error
/// that quotes what was given.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like 50s or 500ms: {e}"))
}
