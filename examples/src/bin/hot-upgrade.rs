//! `hot-upgrade`: upgrade a provider's binary in place N times under load and count
//! every request, new connection and server stream. With the defaults (2 000 req/s,
//! 15 s, 5 upgrades by SIGUSR2) nothing may fail, no connection may be refused, no
//! stream may be cut.
//!
//! `cargo run --release --bin hot-upgrade [-- --registry etcd://127.0.0.1:2379]`
//! Exit code: 0 when the run met every criterion (see the table), 1 otherwise, 2 for
//! unusable options.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use rpc_examples::hot_upgrade::{self, ChildBehaviour, Options, StreamMode, Trigger};

/// Upgrade a provider in place, again and again, under load.
#[derive(Debug, Parser)]
// Negative numbers are values, so that `--rate -5` gets the flag's own message.
#[command(name = "hot-upgrade", version, allow_negative_numbers = true)]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Unary requests per second, open-loop.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    rate: u32,
    /// How long the load runs (e.g. 15s); upgrades are spread across it.
    #[arg(long, default_value = "15s", value_parser = rpc_examples::parse_duration, allow_hyphen_values = true)]
    duration: Duration,
    /// Upgrades to run.
    #[arg(long, default_value_t = 5)]
    upgrades: usize,
    /// How to trigger each upgrade.
    #[arg(long, value_enum, default_value_t = TriggerArg::Signal)]
    trigger: TriggerArg,
    /// Registry URL (etcd://, zookeeper://, nacos://): the consumer finds the provider
    /// there, and any moment the instance is missing is reported. Default: none, the
    /// consumer dials the provider's address.
    #[arg(long)]
    registry: Option<String>,
    /// The first upgrade's new binary: `fail` exits 1 before ready, `hang` never says
    /// ready (killed at --ready-timeout); `gate-fails` and `gate-hangs` start serving on
    /// the inherited socket first and then fail or hang in their readiness gate. The
    /// later upgrades are good.
    #[arg(long, value_enum, default_value_t = ChildArg::Good)]
    child: ChildArg,
    /// The provider's upgrade.ready_timeout.
    #[arg(long, default_value = "3s", value_parser = rpc_examples::parse_duration, allow_hyphen_values = true)]
    ready_timeout: Duration,
    /// The server streams: `short` (greeter streams of 1.5 s, each finishing within an
    /// upgrade's drain) or `resumable` (feed subscriptions lasting the whole run, moved
    /// by the old process at every upgrade and re-opened on the new one). A number is
    /// short streams, that many (as `--stream-count`).
    #[arg(long, default_value = "short", value_parser = parse_streams)]
    streams: StreamsArg,
    /// Server streams kept open.
    #[arg(long, default_value_t = 8)]
    stream_count: usize,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG timeline to this file: requests and failures per second, p99 per
    /// second, each upgrade as a band.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Bytes of each unary request (its `name`, which the greeting sends back): 0 sends
    /// the 4-byte default; at most 4 MiB less 64 bytes.
    #[arg(long, default_value_t = 0)]
    message_size: usize,
    /// Print no progress line.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// (internal) Run as the provider process.
    #[command(hide = true)]
    Provider {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        behaviour: PathBuf,
    },
}

/// `--streams`: a mode, or (as before) a count of short streams.
#[derive(Clone, Copy, Debug)]
enum StreamsArg {
    Mode(StreamMode),
    Count(usize),
}

fn parse_streams(value: &str) -> Result<StreamsArg, String> {
    match value {
        "short" => Ok(StreamsArg::Mode(StreamMode::Short)),
        "resumable" => Ok(StreamsArg::Mode(StreamMode::Resumable)),
        number => number
            .parse()
            .map(StreamsArg::Count)
            .map_err(|_| format!("`{value}`: expected short, resumable or a number of streams")),
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum TriggerArg {
    Signal,
    Admin,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ChildArg {
    Good,
    Fail,
    Hang,
    GateFails,
    GateHangs,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(Mode::Provider { config, behaviour }) = &args.mode {
        std::process::exit(hot_upgrade::run_provider(config, behaviour).await);
    }
    if args.message_size > hot_upgrade::MAX_MESSAGE_SIZE {
        // Unusable options exit 2 (the run's own check would exit 1).
        eprintln!(
            "hot-upgrade: --message-size must be at most {} bytes (gRPC's default 4 MiB message limit)",
            hot_upgrade::MAX_MESSAGE_SIZE
        );
        std::process::exit(2);
    }
    // A run that sends no request would print "lossless: yes" having shown nothing.
    if u128::from(args.rate) * args.duration.as_millis() < 1000 {
        eprintln!(
            "hot-upgrade: --duration {} at --rate {} sends no request; give a longer --duration",
            humantime::format_duration(args.duration),
            args.rate
        );
        std::process::exit(2);
    }
    let executable = match std::env::current_exe() {
        Ok(path) => path,
        Err(error) => {
            eprintln!("hot-upgrade: cannot find this program: {error}");
            std::process::exit(2);
        }
    };
    let options = Options {
        rate: args.rate,
        duration: args.duration,
        upgrades: args.upgrades,
        trigger: match args.trigger {
            TriggerArg::Signal => Trigger::Signal,
            TriggerArg::Admin => Trigger::Admin,
        },
        registry: args.registry.clone(),
        child: match args.child {
            ChildArg::Good => ChildBehaviour::Good,
            ChildArg::Fail => ChildBehaviour::Fail,
            ChildArg::Hang => ChildBehaviour::Hang,
            ChildArg::GateFails => ChildBehaviour::GateFails,
            ChildArg::GateHangs => ChildBehaviour::GateHangs,
        },
        ready_timeout: args.ready_timeout,
        streams: match args.streams {
            StreamsArg::Count(count) => count,
            StreamsArg::Mode(_) => args.stream_count,
        },
        stream_mode: match args.streams {
            StreamsArg::Count(_) => StreamMode::Short,
            StreamsArg::Mode(mode) => mode,
        },
        progress: !args.quiet,
        message_size: args.message_size,
        ..Options::new(executable)
    };
    let summary = match hot_upgrade::run(options).await {
        Ok(summary) => summary,
        Err(error) => {
            eprintln!("hot-upgrade: {error}");
            std::process::exit(1);
        }
    };
    print!("{}", summary.table());
    if let Some(path) = &args.json
        && let Err(error) = summary.write_json(path)
    {
        eprintln!("hot-upgrade: cannot write {}: {error}", path.display());
        std::process::exit(1);
    }
    if let Some(path) = &args.plot
        && let Err(error) = hot_upgrade::write_plot(&summary, path)
    {
        eprintln!(
            "hot-upgrade: cannot write the plot {}: {error}",
            path.display()
        );
        std::process::exit(1);
    }
    // The demonstration's verdict: nothing lost, and the latency during upgrades
    // within its bound (which the tests, on shared machines, do not assert).
    let passed = summary.lossless() && summary.latency_within_bound();
    std::process::exit(if passed { 0 } else { 1 });
}
