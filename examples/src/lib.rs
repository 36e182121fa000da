//! Shared pieces of the `rpc` examples: the provider implementations of the greeter and
//! echo services, logging set-up, and the rolling-deploy tool as a library (so the
//! integration tests run the same code as the binary).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod interop;
pub mod load;
pub mod rolling;
pub mod services;
pub mod serving;

/// Installs a `tracing` subscriber that prints to stderr, filtered by `RUST_LOG`
/// (default `warn`, so examples print only their own output; nacos-sdk's own log is
/// off by default, as it reports its connections' normal closing as errors).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,nacos_sdk=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
