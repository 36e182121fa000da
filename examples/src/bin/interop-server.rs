//! gRPC's interop test server (`grpc.testing.TestService`) as a `lossless-rpc` provider: it
//! registers in a registry, prints its bound address, serves until SIGTERM or SIGINT,
//! runs the graceful shutdown and exits with its code.
//!
//! `cargo run --bin interop-server -- --port 10000`

use clap::Parser;
use lossless_rpc::config::RegistryConfig;
use lossless_rpc::{Application, Config};
use rpc_testkit::interop::server;

/// Serve grpc.testing.TestService (the interop test server).
#[derive(Debug, Parser)]
#[command(name = "interop-server", version)]
struct Args {
    /// Port to listen on; 0 picks a free one (printed as `listening on ADDR`).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// IP to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Registry to announce the service in (`memory://`, `etcd://host:port`, ...).
    #[arg(long, default_value = "memory://")]
    registry: String,
    /// TLS is not supported by this server; only `false` is accepted.
    #[arg(long = "use_tls", default_value_t = false, action = clap::ArgAction::Set)]
    use_tls: bool,
}

#[tokio::main]
async fn main() {
    rpc_testkit::init_logging();
    let args = Args::parse();
    if args.use_tls {
        eprintln!("interop-server: --use_tls=true is not supported");
        std::process::exit(2);
    }
    let mut config = Config::default();
    config.application.name = "interop-server".to_owned();
    config.protocol.host = args.host;
    config.protocol.port = args.port;
    // Interop runs start several servers side by side: the admin endpoint on a free
    // port (printed as `admin listening on ADDR`).
    config.admin.port = 0;
    config
        .registries
        .insert("default".to_owned(), RegistryConfig::new(args.registry));
    let mut builder = Application::builder(config);
    server::provide(&mut builder);
    let app = match builder.start().await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("interop-server: {error}");
            std::process::exit(1);
        }
    };
    std::process::exit(rpc_examples::serving::until_stopped(&app).await);
}
