//! A greeter provider run from a configuration file, as a service would be deployed:
//! it prints its bound address, serves until SIGTERM or SIGINT, runs the graceful
//! shutdown sequence, prints the report and exits with its code (0 clean, 1 forced,
//! 130 / 143 after a second SIGINT / SIGTERM). SIGUSR2 replaces it in place by a new
//! process of its binary (the hot upgrade): this one then prints `shutdown handed over
//! to pid N, ...` and exits 0.
//!
//! `cargo run --bin greeter-provider -- --config examples/config/provider.yaml`

use std::path::PathBuf;

use clap::Parser;
use lossless_rpc::{Application, ApplicationError, Config, StartError};
use proto::greeter::greeter_server::GreeterServer;
use rpc_testkit::services::GreeterProvider;

/// Serve helloworld.Greeter with graceful online/offline.
#[derive(Debug, Parser)]
#[command(name = "greeter-provider", version)]
struct Args {
    /// Configuration file (.yaml, .yml or .toml).
    #[arg(long, short)]
    config: PathBuf,
}

#[tokio::main]
async fn main() {
    rpc_testkit::init_logging();
    let args = Args::parse();
    let config = match Config::from_file(&args.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("greeter-provider: {error}");
            std::process::exit(2);
        }
    };
    let mut builder = Application::builder(config);
    builder.service(GreeterServer::new(GreeterProvider));
    let app = match builder.start().await {
        Ok(app) => app,
        Err(ApplicationError::Start(StartError::Interrupted)) => {
            // SIGTERM/SIGINT before serving: what had started was undone; a clean stop.
            eprintln!("greeter-provider: stopped during start-up");
            std::process::exit(0);
        }
        Err(error) => {
            // A passed configuration check (a hot upgrade's) is a clean stop (0); an
            // invalid configuration is 2.
            eprintln!("greeter-provider: {error}");
            std::process::exit(error.exit_code());
        }
    };
    std::process::exit(rpc_examples::serving::until_stopped(&app).await);
}
