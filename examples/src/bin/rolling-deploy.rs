//! `rolling-deploy`: roll every proxy and provider of a service chain under load and
//! count every request. With graceful online/offline on, 0 must fail.
//!
//! `cargo run --release --bin rolling-deploy` (about a minute with the defaults).
//! Exit code: 0 when no request failed, every restart happened and the `--json` /
//! `--plot` files were written; 1 otherwise; 2 for unusable options.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rpc_examples::rolling::{self, Bound, Mode, Options, Role, Streams};

/// Roll every instance of a client → proxy → provider chain under a fixed request rate,
/// and count every request.
#[derive(Debug, Parser)]
// Negative numbers are values, so that `--rate -5` gets the flag's own message.
#[command(name = "rolling-deploy", version, allow_negative_numbers = true)]
struct Args {
    /// Requests per second, sent open-loop (on schedule, whether or not earlier ones
    /// finished).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..))]
    rate: u32,
    /// How long the load runs (e.g. 50s, 2m); restarts are spread across it.
    #[arg(long, default_value = "50s", value_parser = rpc_examples::parse_duration, allow_hyphen_values = true)]
    duration: Duration,
    /// Number of proxies (each a consumer of the providers and a provider to the client).
    #[arg(long, default_value_t = 5)]
    proxies: usize,
    /// Number of providers.
    #[arg(long, default_value_t = 5)]
    providers: usize,
    /// How many full rolls of every instance; 0: steady load, no restart.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Request payload in bytes (echoed back, so as much each way); at most 4 MiB less
    /// 64 bytes. Also spelled `--message-size`.
    #[arg(long, visible_alias = "message-size", default_value_t = 64)]
    payload: usize,
    /// Provider work per request, in milliseconds.
    #[arg(long, default_value_t = 1)]
    work_ms: u32,
    /// Graceful online/offline: `on` runs the real shutdown sequence; `off` kills
    /// instances the way a plain restart does.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    graceful: Switch,
    /// The adaptive concurrency limit (`provider.limit`) on every proxy and provider:
    /// `on` refuses the excess of an overload at once as RESOURCE_EXHAUSTED.
    #[arg(long, value_enum, default_value_t = Switch::Off)]
    limit: Switch,
    /// Registry URL. `memory://` (in-process) is the embedded default; its propagation
    /// delay is --registry-delay unless the URL sets `?delay=`.
    #[arg(long, default_value = "memory://")]
    registry: String,
    /// Most requests in flight at once. A request due while this many are outstanding
    /// is not sent and counts as failed (ResourceExhausted): memory stays bounded when
    /// --rate is more than the machine can serve.
    #[arg(long, default_value_t = rpc_testkit::load::DEFAULT_MAX_OUTSTANDING)]
    max_outstanding: usize,
    /// Propagation delay of the in-process registry, standing in for a real registry's.
    #[arg(long, default_value = "300ms", value_parser = rpc_examples::parse_duration, allow_hyphen_values = true)]
    registry_delay: Duration,
    /// `in-process`: every instance is an Application in this process; `processes`:
    /// every instance is a child process restarted by a real SIGTERM.
    #[arg(long, value_enum, default_value_t = Mode::InProcess)]
    mode: Mode,
    /// Watch every instance's admin endpoint: poll `GET /ready` every 100 ms and show
    /// in the table and the plot when each one was ready and not ready.
    #[arg(long)]
    admin: bool,
    /// Long streams beside the load: `resumable` follows `--stream-count` feed
    /// subscriptions to the providers for the whole run; each provider's stop moves the
    /// ones it serves and they resume elsewhere (streams moved / cut in the table, plot
    /// and JSON). Default `off`.
    #[arg(long, value_enum, default_value_t = Streams::Off)]
    streams: Streams,
    /// Feed subscriptions with `--streams resumable`.
    #[arg(long, default_value_t = 4)]
    stream_count: usize,
    /// Most instances of a role above its count while one is replaced, as a count or a
    /// percentage rounded up (Kubernetes' maxSurge). At least 1: each replacement
    /// starts, registers and is ready before the old instance stops; 0: the old one
    /// stops first.
    #[arg(long, default_value = "25%")]
    max_surge: Bound,
    /// Most instances of a role below its count while one is replaced, as a count or a
    /// percentage rounded down (Kubernetes' maxUnavailable). Both 0 is refused.
    #[arg(long, default_value = "25%")]
    max_unavailable: Bound,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the timeline (rate, failures, p99, restarts) as SVG to this file (the path
    /// must end in .svg).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Do not print the progress line every second.
    #[arg(long)]
    quiet: bool,
    /// Internal: run as one child instance of `--mode processes`.
    #[arg(long, value_enum, hide = true)]
    role: Option<Role>,
    /// Internal: the child instance's name.
    #[arg(long, hide = true, default_value = "instance")]
    name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Switch {
    On,
    Off,
}

#[tokio::main]
async fn main() {
    rpc_testkit::init_logging();
    let args = Args::parse();
    if let Some(role) = args.role {
        std::process::exit(
            rolling::run_child(
                role,
                &args.name,
                &args.registry,
                args.work_ms,
                args.limit == Switch::On,
            )
            .await,
        );
    }
    let options = Options {
        rate: args.rate,
        duration: args.duration,
        proxies: args.proxies,
        providers: args.providers,
        rounds: args.rounds,
        payload: args.payload,
        work_ms: args.work_ms,
        graceful: args.graceful == Switch::On,
        limit: args.limit == Switch::On,
        registry: args.registry,
        registry_delay: args.registry_delay,
        max_outstanding: args.max_outstanding,
        mode: args.mode,
        admin: args.admin,
        streams: args.streams,
        stream_count: args.stream_count,
        max_surge: args.max_surge,
        max_unavailable: args.max_unavailable,
        progress: !args.quiet,
        ..Options::default()
    };
    // Fail before a minute of load, not after it, when an output file cannot be written.
    if let Err(message) = check_outputs(args.json.as_deref(), args.plot.as_deref()) {
        eprintln!("rolling-deploy: {message}");
        std::process::exit(2);
    }
    // Handlers of our own, so Ctrl-C works even when the launcher ignores SIGINT, and an
    // interrupted run says so instead of vanishing or writing its files.
    let interrupted = match interrupted() {
        Ok(interrupted) => interrupted,
        Err(error) => {
            eprintln!("rolling-deploy: cannot install signal handlers: {error}");
            std::process::exit(2);
        }
    };
    let result = tokio::select! {
        result = rolling::run(options) => result,
        (name, code) = interrupted => {
            eprintln!("rolling-deploy: interrupted by {name}; no summary, no --json/--plot written");
            std::process::exit(code);
        }
    };
    let summary = match result {
        Ok(summary) => summary,
        Err(error) => {
            eprintln!("rolling-deploy: {error}");
            std::process::exit(2);
        }
    };
    // Output errors (a closed pipe) are ignored: the exit code carries the result.
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{}", summary.table());
    let json_written = args.json.as_ref().is_none_or(|path| {
        let result = summary.write_json(path).map_err(|e| e.to_string());
        announce(&mut stdout, "json", path, result)
    });
    let plot_written = args.plot.as_ref().is_none_or(|path| {
        announce(
            &mut stdout,
            "plot",
            path,
            rolling::write_plot(&summary, path),
        )
    });
    let _ = stdout.flush();
    let written = json_written && plot_written;
    std::process::exit(if summary.lossless() && written { 0 } else { 1 });
}

/// Resolves at the first SIGINT or SIGTERM, with the signal's name and the exit code
/// it implies (130 / 143).
fn interrupted() -> std::io::Result<impl std::future::Future<Output = (&'static str, i32)>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = sigint.recv() => ("SIGINT", 130),
            _ = sigterm.recv() => ("SIGTERM", 143),
        }
    })
}

/// Prints where an output file went, or why it could not be written; true when written.
fn announce(out: &mut impl Write, label: &str, path: &Path, result: Result<(), String>) -> bool {
    match result {
        Ok(()) => {
            let _ = writeln!(out, "  {label:<9} {}", path.display());
            true
        }
        Err(error) => {
            eprintln!("rolling-deploy: cannot write {}: {error}", path.display());
            false
        }
    }
}

/// Checks that the `--json` and `--plot` files can be written, without creating or
/// truncating them: a run that is refused or interrupted leaves earlier results intact.
fn check_outputs(json: Option<&Path>, plot: Option<&Path>) -> Result<(), String> {
    if let Some(plot) = plot {
        let svg = plot
            .extension()
            .is_some_and(|extension| extension.eq_ignore_ascii_case("svg"));
        if !svg {
            return Err(format!(
                "--plot {}: the timeline is drawn as SVG; give a path ending in .svg",
                plot.display()
            ));
        }
    }
    for path in json.into_iter().chain(plot) {
        writable(path).map_err(|reason| format!("cannot write {}: {reason}", path.display()))?;
    }
    Ok(())
}

/// Whether `path` can be written: an existing file opened for appending (which changes
/// nothing), or a new file in an existing directory.
fn writable(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err("it is a directory".into()),
        Ok(_) => std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|error| error.to_string()),
        Err(_) => {
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            match std::fs::metadata(parent) {
                Ok(meta) if meta.is_dir() => Ok(()),
                Ok(_) => Err(format!("{} is not a directory", parent.display())),
                Err(error) => Err(format!("{}: {error}", parent.display())),
            }
        }
    }
}
