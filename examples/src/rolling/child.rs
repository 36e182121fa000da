//! The child's side of `--mode processes`: one instance in its own process, which says
//! when it is ready, serves until a signal (or its parent's exit) runs the shutdown
//! sequence, and hands its shutdown report back on stdout.

use super::fleet::Fleet;
use super::role::Role;

/// The body of a child process: start one instance, print `ready ADDR admin
/// ADMIN_ADDR`, serve until a signal runs the shutdown sequence, print `report JSON`,
/// and return the exit code.
pub async fn run_child(role: Role, name: &str, registry: &str, work_ms: u32, limit: bool) -> i32 {
    use std::io::Write;
    let fleet = Fleet::for_child(registry, work_ms, limit);
    let app = match fleet.start_in_process(role, name).await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("{name}: {error}");
            return 1;
        }
    };
    // Write errors are ignored: a parent that stopped reading must not make us panic.
    let mut stdout = std::io::stdout();
    let addr = app.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let _ = match app.admin_addr() {
        Some(admin) => writeln!(stdout, "ready {addr} admin {admin}"),
        None => writeln!(stdout, "ready {addr}"),
    };
    let _ = stdout.flush();
    watch_parent(app.lifecycle().clone());
    let report = app.wait().await;
    let _ = writeln!(
        stdout,
        "report {}",
        serde_json::to_string(&report).unwrap_or_default()
    );
    let _ = stdout.flush();
    report.exit_code()
}

/// Starts the graceful shutdown when stdin closes: the parent holds the other end, so
/// this happens when the parent exits for any reason (even SIGKILL), and the child
/// leaves instead of serving on, registered, forever.
fn watch_parent(lifecycle: lossless_rpc::Lifecycle) {
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 64];
        while let Ok(read) = stdin.read(&mut buffer).await {
            if read == 0 {
                break;
            }
        }
        drop(lifecycle.before_shutdown());
    });
}
