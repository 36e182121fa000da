//! The parent's side of `--mode processes`: every instance is a child process of the
//! rolling-deploy binary (its body is in `child.rs`), stopped by a real signal.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use lossless_rpc::ShutdownReport;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::role::Role;

/// Bound on a child printing its address after it was spawned.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a child exiting after SIGTERM (its shutdown timeout is 60 s at most).
const STOP_TIMEOUT: Duration = Duration::from_secs(70);

/// A provider or proxy running as a child process.
pub struct ChildInstance {
    child: Child,
    addr: String,
    admin: Option<SocketAddr>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Held open while the child should live: a child whose stdin closes (this process
    /// died or was killed) shuts itself down, so no instance outlives the run.
    _lifeline: ChildStdin,
}

impl ChildInstance {
    /// Spawns `executable --role ROLE --name NAME --registry URL --work-ms N --limit
    /// on|off` and waits
    /// for its `ready ADDR [admin ADMIN_ADDR]` line.
    pub(crate) async fn spawn(
        executable: &Path,
        role: Role,
        name: &str,
        url: &str,
        work_ms: u32,
        limit: bool,
    ) -> Result<Self, String> {
        let mut child = Command::new(executable)
            .args(["--role", role.name(), "--name", name, "--registry", url])
            .args(["--work-ms", &work_ms.to_string()])
            .args(["--limit", if limit { "on" } else { "off" }])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", executable.display()))?;
        let lifeline = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let line = tokio::time::timeout(START_TIMEOUT, stdout.next_line())
            .await
            .map_err(|_| format!("no `ready` line within {START_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "the child exited before it was ready".to_owned())?;
        let unexpected = || format!("unexpected line from the child: {line:?}");
        let mut words = line
            .strip_prefix("ready ")
            .ok_or_else(unexpected)?
            .split(' ');
        let addr = words.next().unwrap_or_default().to_owned();
        let admin = match (words.next(), words.next()) {
            (Some("admin"), Some(admin)) => Some(admin.parse().map_err(|_| unexpected())?),
            _ => None,
        };
        Ok(Self {
            child,
            addr,
            admin,
            stdout,
            _lifeline: lifeline,
        })
    }

    /// The address the child serves on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The child's admin endpoint, if it has one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// SIGTERM and the child's shutdown report, or SIGKILL (no report).
    pub(crate) async fn stop(mut self, graceful: bool) -> Option<ShutdownReport> {
        let pid = self.child.id()?;
        let signal = if graceful {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        };
        if let Err(error) = kill(Pid::from_raw(pid as i32), signal) {
            eprintln!("rolling-deploy: cannot signal child {pid}: {error}");
        }
        let mut report = None;
        let read = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                if let Some(json) = line.strip_prefix("report ") {
                    report = serde_json::from_str(json).ok();
                }
            }
            let _ = self.child.wait().await;
        };
        if tokio::time::timeout(STOP_TIMEOUT, read).await.is_err() {
            eprintln!(
                "rolling-deploy: child {pid} did not exit within {STOP_TIMEOUT:?}; killing it"
            );
            let _ = self.child.kill().await;
        }
        report
    }
}
