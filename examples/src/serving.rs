//! How the example providers run as processes: print the bound address and the admin
//! endpoint's (tests and scripts read them), serve until SIGTERM or SIGINT ran the graceful shutdown, print its
//! report, and return the exit code it implies.

use std::io::Write;

use lossless_rpc::Application;

/// Prints `listening on ADDR` and `admin listening on ADDR`, waits for the shutdown sequence to finish, prints
/// `shutdown <report>` and returns the report's exit code (0 clean, 1 forced, 130 / 143
/// after a second SIGINT / SIGTERM) for `main` to exit with.
pub async fn until_stopped(app: &Application) -> i32 {
    // A closed stdout (the parent stopped reading) must not turn into a panic.
    let mut stdout = std::io::stdout();
    if let Some(addr) = app.local_addr() {
        let _ = writeln!(stdout, "listening on {addr}");
    }
    if let Some(addr) = app.admin_addr() {
        let _ = writeln!(stdout, "admin listening on {addr}");
    }
    let _ = stdout.flush();
    let report = app.wait().await;
    let _ = writeln!(stdout, "shutdown {report}");
    report.exit_code()
}
