//! The provider process of the lab's tests (`tests/lab_upgrade.rs`, `tests/lab_nacos.rs`):
//! an echo provider (20 ms of work per call) configured by the file its one argument
//! names, run inside a host of the lab (`ip netns exec`). It prints `pid N`, `serving
//! HOST:PORT` and (its admin endpoint enabled) `admin HOST:PORT` once serving and `shutdown REPORT` at its end, and exits with the report's
//! code; SIGTERM stops it gracefully. SIGUSR2 or the admin endpoint's `POST /upgrade`
//! replaces it in place by a new process of this binary (the hot upgrade), which
//! inherits stdout.

use std::io::Write;

use proto::echo::echo_server::EchoServer;
use rpc::{Application, Config};
use rpc_testkit::services::EchoProvider;

fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

async fn serve() -> i32 {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: lab_echo_provider CONFIG");
        return 2;
    };
    let config = match Config::from_file(&path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("lab_echo_provider: {error}");
            return 2;
        }
    };
    let mut builder = Application::builder(config);
    builder.service(EchoServer::new(EchoProvider { work_ms: 20 }));
    let app = match builder.start().await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("lab_echo_provider: {error}");
            return error.exit_code();
        }
    };
    say(&format!("pid {}", std::process::id()));
    if let Some(address) = app.local_addr() {
        say(&format!("serving {address}"));
    }
    if let Some(admin) = app.admin_addr() {
        say(&format!("admin {admin}"));
    }
    let report = app.wait().await;
    say(&format!("shutdown {report}"));
    report.exit_code()
}

#[tokio::main]
async fn main() {
    let code = serve().await;
    std::process::exit(code);
}
