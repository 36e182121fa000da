//! Logging set-up shared by the example binaries.

/// Installs a `tracing` subscriber that prints to stderr, filtered by `RUST_LOG`
/// (default `warn`, so examples print only their own output; nacos-sdk's own log is
/// off by default, as it reports its connections' normal closing as errors).
///
/// Does nothing when a subscriber is already installed (a second call, or a test
/// harness that set its own).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,nacos_sdk=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
