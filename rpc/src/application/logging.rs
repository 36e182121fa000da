//! The default `tracing` subscriber: without one, every log line of the framework (the
//! address it serves on, the registry it reached, each shutdown step) is dropped, and a
//! first provider starts and stops in silence.
//!
//! [`ApplicationBuilder::start`](super::ApplicationBuilder::start) installs it unless
//! `application.logging` is false or the process already has a global subscriber (one
//! the application set up itself always wins). It prints to stderr, filtered by
//! `RUST_LOG` when set, else by [`DEFAULT_FILTER`].

/// The filter used when `RUST_LOG` is not set: `info` for the framework's own crates
/// (`lossless_rpc` and `lossless_rpc_*`, the targets of their log lines; start-up,
/// the advertised address, each phase change, the shutdown report: about a dozen lines
/// per start and stop), `warn` for every other crate. nacos-sdk's own log is off: it
/// reports the normal closing of its connections as errors, and the Nacos backend logs
/// what matters itself.
pub const DEFAULT_FILTER: &str = concat!(
    "warn,lossless_rpc=info,lossless_rpc_core=info,lossless_rpc_registry=info,",
    "lossless_rpc_cluster=info,lossless_rpc_filter=info,nacos_sdk=off"
);

/// Installs the default subscriber if `enabled` and no global subscriber exists yet;
/// returns whether this call installed it.
pub(super) fn install_default_subscriber(enabled: bool) -> bool {
    if !enabled || tracing::dispatcher::has_been_set() {
        return false;
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_filter_parses() {
        let filter: tracing_subscriber::EnvFilter = DEFAULT_FILTER.parse().unwrap();
        let text = filter.to_string();
        assert!(text.contains("lossless_rpc_core=info"), "{text}");
    }

    #[test]
    fn nothing_is_installed_when_logging_is_off() {
        assert!(!install_default_subscriber(false));
    }
}
