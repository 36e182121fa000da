//! The old process's side of the hot upgrade: run the new binary's configuration check
//! (and read its report, `check_report`), start it with the listening sockets, wait for its `ready`, and kill and reap it when
//! it fails.
//!
//! # `LISTEN_PID`
//!
//! systemd's convention wants `LISTEN_PID` to be the pid of the process the sockets are
//! for, which exists only after the fork. systemd sets it between fork and exec; doing
//! the same from Rust would need an `unsafe` pre-exec hook that must not allocate
//! (`setenv` may), in a multi-threaded process. The program is instead started through
//! `/bin/sh -c 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"'`: `$$` is the shell's
//! pid, and `exec` replaces the shell by the program *in the same process*, so the pid
//! is right, and the program (and the pid we wait on) is the one we meant; the
//! descriptors mapped by `command-fds` pass through `exec` untouched. The cost is one
//! extra exec (about a millisecond) and a `/bin/sh`, which every host running a hot
//! upgrade has (containers use rolling updates instead: see docs/upgrade.md).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::process::{ExitStatus, Stdio};

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::check_report::CheckReport;
use super::stderr::{StderrCapture, TAIL_BYTES};
use super::{
    ALL_VARS, CHANNEL_FD_VAR, CHECK_FD_VAR, INSTANCES_VAR, OFFLINE_VAR, Program, ROLE_VAR, Role,
    STDERR_FD_VAR,
};
use crate::{Handoff, Spawner, Successor};
use rpc_transport::ListenFds;

/// What a new process writes on the hand-over channel once it serves.
pub const READY_LINE: &str = "ready";

/// The shell script that sets `LISTEN_PID` to its own pid and becomes the program.
const EXEC_WITH_LISTEN_PID: &str = r#"LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@""#;

/// Starts `program` as the hot upgrade's new process (see the module documentation).
#[derive(Clone, Debug)]
pub struct ProcessSpawner {
    program: Program,
}

impl ProcessSpawner {
    /// A spawner of `program` (typically [`Program::current`], read at start-up).
    pub fn new(program: Program) -> Self {
        Self { program }
    }

    /// The program it starts.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// `program` run through the shell that sets `LISTEN_PID`, in `role`, with no
    /// stale upgrade variable.
    fn command(&self, role: Role) -> Command {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(EXEC_WITH_LISTEN_PID)
            .arg(&self.program.binary)
            .args(&self.program.args)
            .stdin(Stdio::null());
        for var in ALL_VARS
            .iter()
            .chain(&["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"])
        {
            command.env_remove(var);
        }
        if let Some(value) = role.value() {
            command.env(ROLE_VAR, value);
        }
        command
    }
}

#[async_trait]
impl Spawner for ProcessSpawner {
    fn binary(&self) -> Option<&std::path::Path> {
        Some(&self.program.binary)
    }

    /// Runs the check with a report channel (see `check_report`): the report decides;
    /// the exit status only when none came.
    async fn check(&self) -> Result<(), String> {
        let binary = self.program.binary.display();
        let stderr = StderrCapture::new().map_err(|e| format!("cannot capture stderr: {e}"))?;
        let (ours, theirs) =
            StdUnixStream::pair().map_err(|e| format!("cannot make the check's channel: {e}"))?;
        let mut fds = ListenFds::new();
        let report_fd = fds.extra(OwnedFd::from(theirs));
        let mut command = self.command(Role::Check);
        command
            .env(CHECK_FD_VAR, report_fd.to_string())
            .stdout(Stdio::null())
            .stderr(stderr.stdio().map_err(|e| e.to_string())?)
            .kill_on_drop(true);
        fds.apply(&mut command).map_err(|e| e.to_string())?;
        let mut child = command
            .spawn()
            .map_err(|error| format!("cannot run {binary}: {error}"))?;
        // The command held the child's end: drop it, so that this end reads EOF once the
        // child has exited (or closed it) without a report.
        drop(command);
        // Dropping this future (the upgrade's bound passed, or a shutdown) kills the
        // check (kill_on_drop) and tokio reaps it.
        let report = read_report(ours).await;
        if let Some(report) = report {
            // The outcome is known and the check started nothing: whatever `main` does
            // next (exit 0, exit 1, anything) no longer matters.
            let _ = child.start_kill();
            let _ = child.wait().await;
            return match report {
                CheckReport::Passed => Ok(()),
                CheckReport::Failed(message) => Err(format!(
                    "the configuration check of {binary} failed: {message}"
                )),
            };
        }
        // No report: a binary that failed before it reached `start()` (an unreadable
        // configuration file), or one that does not report. Its exit status decides.
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "the configuration check of {binary} failed ({}, no report): {}",
                describe(status),
                stderr.tail(TAIL_BYTES)
            ))
        }
    }

    fn spawn(&self, handoff: Handoff) -> Result<Box<dyn Successor>, String> {
        spawn(self.command(Role::Successor), handoff)
            .map(|successor| Box::new(successor) as Box<dyn Successor>)
            .map_err(|error| format!("cannot start {}: {error}", self.program.binary.display()))
    }
}

fn spawn(mut command: Command, handoff: Handoff) -> io::Result<ProcessSuccessor> {
    let Handoff {
        mut listeners,
        instances,
        offline,
    } = handoff;
    let stderr = StderrCapture::new()?;
    let (ours, theirs) = StdUnixStream::pair()?;
    // The child's own fd 2 is the capture file until it is ready; this is where its
    // logs go afterwards (this process's fd 2 is that original: see `predecessor`).
    let original_stderr = io::stderr().as_fd().try_clone_to_owned()?;
    let channel_fd = listeners.extra(OwnedFd::from(theirs));
    let stderr_fd = listeners.extra(original_stderr);
    let instances = serde_json::to_string(&instances).map_err(io::Error::other)?;
    let offline = serde_json::to_string(&offline).map_err(io::Error::other)?;
    command
        .env(CHANNEL_FD_VAR, channel_fd.to_string())
        .env(STDERR_FD_VAR, stderr_fd.to_string())
        .env(INSTANCES_VAR, instances)
        .env(OFFLINE_VAR, offline)
        .stderr(stderr.stdio()?);
    listeners.apply(&mut command)?;
    let child = command.spawn()?;
    // The command held the child's ends of every descriptor; drop it so that this
    // process keeps only its own (and reads EOF on the channel when the child exits).
    drop(command);
    ours.set_nonblocking(true)?;
    let channel = UnixStream::from_std(ours)?;
    let pid = child.id().unwrap_or(0);
    Ok(ProcessSuccessor {
        child,
        pid,
        channel: BufReader::new(channel),
        stderr,
    })
}

/// The started new process.
#[derive(Debug)]
struct ProcessSuccessor {
    child: Child,
    pid: u32,
    channel: BufReader<UnixStream>,
    stderr: StderrCapture,
}

#[async_trait]
impl Successor for ProcessSuccessor {
    fn pid(&self) -> u32 {
        self.pid
    }

    async fn ready(&mut self) -> Result<(), String> {
        let mut line = String::new();
        let read = self.channel.read_line(&mut line).await;
        match read {
            Ok(_) if line.trim() == READY_LINE => Ok(()),
            // EOF: the process closed its end, i.e. exited (or was never an rpc
            // application). Its status says how.
            Ok(0) => {
                let status = self.child.wait().await.map_err(|e| e.to_string())?;
                Err(format!(
                    "the new process {} exited before it was ready ({}): {}",
                    self.pid,
                    describe(status),
                    self.stderr.tail(TAIL_BYTES)
                ))
            }
            Ok(_) => Err(format!(
                "the new process {} wrote {:?} on the hand-over channel instead of {READY_LINE:?}",
                self.pid,
                line.trim()
            )),
            Err(error) => Err(format!("reading the hand-over channel failed: {error}")),
        }
    }

    async fn abandon(mut self: Box<Self>) -> String {
        // SIGKILL: a process that failed its start, or did not make it in time, has
        // nothing left to do gracefully (it never registered as ready, and it never
        // served a connection the old process would not have served too).
        let _ = self.child.start_kill();
        let status = self.child.wait().await;
        let tail = self.stderr.tail(TAIL_BYTES);
        tracing::info!(pid = self.pid, status = ?status.map(describe), "new process killed and reaped");
        tail
    }

    fn taken_over(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        // Its start-up output went to the capture file only: show it here.
        self.stderr.copy_to_stderr();
        // The channel stays open as long as this process lives: the new process reads
        // EOF on it when this one has exited (its predecessor is gone). The child
        // handle is dropped without killing; once this process exits, the new one is
        // adopted by init (or systemd, its service manager).
        Box::new(self.channel)
    }
}

/// The check's report read from `ours`, the old process's end of the channel: `None`
/// at EOF without a report (the child exited, or closed its end), or when the line is
/// not one.
async fn read_report(ours: StdUnixStream) -> Option<CheckReport> {
    ours.set_nonblocking(true).ok()?;
    let mut channel = BufReader::new(UnixStream::from_std(ours).ok()?);
    let mut line = String::new();
    match channel.read_line(&mut line).await {
        Ok(0) | Err(_) => None,
        Ok(_) => CheckReport::parse(&line),
    }
}

/// "exit code N" or "killed by signal N".
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The upgrade's log names the path that will run, also when `upgrade.binary` is
    /// unset (it printed `binary=None`).
    #[test]
    fn the_spawner_names_the_binary_it_starts() {
        let spawner = ProcessSpawner::new(Program {
            binary: "/usr/local/bin/greeter".into(),
            args: Vec::new(),
        });
        assert_eq!(spawner.binary(), Some(Path::new("/usr/local/bin/greeter")));
    }
}
