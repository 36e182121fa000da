//! gRPC's interop test client, calling through a `lossless-rpc` reference:
//! `--server_host` and `--server_port` become a `static://host:port` registry (or
//! `--registry` names any registry the server announced itself in). Prints one line per
//! case (`PASS name`, `FAIL name: why`, `N/A name: why`) and exits 1 when a case
//! failed, 2 when it could not run.
//!
//! `cargo run --bin interop-client -- --server_port 10000 --test_case all`

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use lossless_rpc::core::format_authority;
use rpc_testkit::interop::case::{Case, Verdict, line};
use rpc_testkit::interop::client::{client_config, connect};
use rpc_testkit::interop::procedures;

/// Run gRPC interop test cases against a grpc.testing.TestService server.
#[derive(Debug, Parser)]
#[command(name = "interop-client", version)]
struct Args {
    /// Host of the server.
    #[arg(long = "server_host", default_value = "127.0.0.1")]
    server_host: String,
    /// Port of the server (required unless --registry is given).
    #[arg(long = "server_port")]
    server_port: Option<u16>,
    /// A case's name, or `all`.
    #[arg(long = "test_case", default_value = "all")]
    test_case: String,
    /// Find the server in this registry instead (`etcd://host:port`, ...).
    #[arg(long)]
    registry: Option<String>,
    /// TLS is not supported by this client; only `false` is accepted.
    #[arg(long = "use_tls", default_value_t = false, action = clap::ArgAction::Set)]
    use_tls: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    rpc_testkit::init_logging();
    let args = Args::parse();
    let cases = match Case::select(&args.test_case) {
        Ok(cases) => cases,
        Err(error) => return usage(&error.to_string()),
    };
    if args.use_tls {
        return usage("--use_tls=true is not supported");
    }
    let registry = match (args.registry, args.server_port) {
        (Some(registry), _) => registry,
        (None, Some(port)) => format!("static://{}", format_authority(&args.server_host, port)),
        (None, None) => return usage("--server_port (or --registry) is required"),
    };
    let (app, client) = match connect(client_config(&registry)).await {
        Ok(connected) => connected,
        Err(error) => {
            eprintln!("interop-client: {error}");
            return ExitCode::from(2);
        }
    };
    let mut failed = 0;
    let mut stdout = std::io::stdout();
    for case in cases {
        let verdict = procedures::run(&client, case).await;
        failed += usize::from(matches!(verdict, Verdict::Fail(_)));
        let _ = writeln!(stdout, "{}", line(case, &verdict));
        let _ = stdout.flush();
    }
    app.before_shutdown().await;
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("interop-client: {why}");
    ExitCode::from(2)
}
