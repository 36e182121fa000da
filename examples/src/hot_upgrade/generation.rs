//! The provider's processes as the demonstration sees them from outside: the first
//! generation it starts, the pid file every generation rewrites, and what `/proc` tells
//! about each (descriptors, the listening socket's inode, zombies).
//!
//! This process makes itself a *child subreaper* (prctl), so every generation — the
//! second is a child of the first, which exits — is reparented here rather than to
//! init, and reaped here: the run can prove that none is left a zombie, and read each
//! old generation's exit code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Bound on the first generation printing its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The provider's processes, and everything they printed.
#[derive(Clone)]
pub struct Generations {
    pid_file: PathBuf,
    /// Every line the generations printed on their shared stdout.
    lines: Arc<Mutex<Vec<String>>>,
    /// Exit codes of the generations reaped here, by pid (`-signal` when killed).
    exits: Arc<Mutex<BTreeMap<i32, i32>>>,
    addr: String,
}

impl Generations {
    /// Starts the first generation (`executable provider --config CONFIG --behaviour
    /// BEHAVIOUR`) and waits for its address.
    pub async fn start(
        executable: &Path,
        config: &Path,
        behaviour: &Path,
        pid_file: PathBuf,
    ) -> Result<Self, String> {
        nix::sys::prctl::set_child_subreaper(true)
            .map_err(|e| format!("cannot become a child subreaper: {e}"))?;
        let mut command = std::process::Command::new(executable);
        command
            .arg("provider")
            .arg("--config")
            .arg(config)
            .arg("--behaviour")
            .arg(behaviour)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // Spawned with std (not tokio's Command): the reaper below waits for every
        // generation alike, and tokio must not race it for the first one.
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", executable.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stdout = tokio::process::ChildStdout::from_std(stdout).map_err(|e| e.to_string())?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(read_lines(stdout, lines.clone(), addr_tx));
        let exits = reaped();
        let addr = tokio::time::timeout(START_TIMEOUT, addr_rx)
            .await
            .map_err(|_| format!("the provider printed no address within {START_TIMEOUT:?}"))?
            .map_err(|_| "the provider exited before it served".to_owned())?;
        drop(child);
        let generations = Self {
            pid_file,
            lines,
            exits,
            addr,
        };
        generations.wait_for_pid_change(0, START_TIMEOUT).await?;
        Ok(generations)
    }

    /// The address the provider serves on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The pid in the pid file (the generation that serves now).
    pub fn current(&self) -> Option<i32> {
        std::fs::read_to_string(&self.pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Waits until the pid file names another process than `old`.
    pub async fn wait_for_pid_change(&self, old: i32, within: Duration) -> Result<i32, String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pid) = self.current().filter(|pid| *pid != old) {
                return Ok(pid);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("the pid file still names {old} after {within:?}"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (bounded) until `pid` has exited and was reaped here; its exit code.
    pub async fn wait_exit(&self, pid: i32, within: Duration) -> Option<i32> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(code) = self.exits.lock().get(&pid) {
                return Some(*code);
            }
            if tokio::time::Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The admin endpoint's address, as the first generation printed it (every later
    /// generation serves the same, inherited socket).
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        self.lines
            .lock()
            .iter()
            .find_map(|line| line.strip_prefix("admin on ")?.parse().ok())
    }

    /// Every line printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// Exit codes of the generations that exited, by pid.
    pub fn exits(&self) -> BTreeMap<i32, i32> {
        self.exits.lock().clone()
    }

    /// SIGTERM to the current generation; waits for it to exit (bounded).
    pub async fn stop(&self) -> Option<i32> {
        let pid = self.current()?;
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        self.wait_exit(pid, Duration::from_secs(30)).await
    }
}

async fn read_lines(
    stdout: tokio::process::ChildStdout,
    lines: Arc<Mutex<Vec<String>>>,
    addr: tokio::sync::oneshot::Sender<String>,
) {
    let mut addr = Some(addr);
    let mut reader = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = reader.next_line().await {
        if let Some(found) = line.strip_prefix("listening on ")
            && let Some(tx) = addr.take()
        {
            let _ = tx.send(found.to_owned());
        }
        lines.lock().push(line);
    }
}

/// The exit codes of every child (and adopted orphan) of this process, reaped by one
/// thread for the whole process (every run in it shares it: `waitpid(-1)` would
/// otherwise let one run's reaper take another's exits).
fn reaped() -> Arc<Mutex<BTreeMap<i32, i32>>> {
    static EXITS: std::sync::OnceLock<Arc<Mutex<BTreeMap<i32, i32>>>> = std::sync::OnceLock::new();
    EXITS
        .get_or_init(|| {
            let exits = Arc::new(Mutex::new(BTreeMap::new()));
            let record = exits.clone();
            std::thread::Builder::new()
                .name("hot-upgrade-reaper".into())
                .spawn(move || reap(&record))
                .expect("spawn the reaper thread");
            exits
        })
        .clone()
}

/// Reaps every child of this process as it exits, forever.
fn reap(exits: &Mutex<BTreeMap<i32, i32>>) {
    loop {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => {
                    exits.lock().insert(pid.as_raw(), code);
                }
                Ok(WaitStatus::Signaled(pid, signal, _)) => {
                    exits.lock().insert(pid.as_raw(), -(signal as i32));
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Open descriptors of `pid`.
pub fn fd_count(pid: i32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The inode of the socket `pid` listens on at `port` (from `/proc/PID/net/tcp`).
pub fn listening_inode(pid: i32, port: u16) -> Option<u64> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    let inode = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local = fields.get(1)?;
        let state = fields.get(3)?;
        let local_port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
        (local_port == port && *state == "0A").then(|| fields.get(9)?.parse().ok())?
    })?;
    // The table is the network namespace's: check this process holds that socket.
    let target = format!("socket:[{inode}]");
    let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(Result::ok)
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|link| link.to_string_lossy() == target));
    held.then_some(inode)
}

/// Processes whose command line mentions `marker` (this run's config file): (pid,
/// state) — `Z` for a zombie.
pub fn processes_of(marker: &str) -> Vec<(i32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit(") ").next()?.chars().next()?;
            let mentions = String::from_utf8_lossy(&cmdline).contains(marker);
            // A zombie has an empty command line: find it by its parent, this process.
            let ppid: i32 = stat.rsplit(") ").next()?.split(' ').nth(1)?.parse().ok()?;
            let zombie_child = state == 'Z' && ppid == std::process::id() as i32;
            (mentions || zombie_child).then_some((pid, state))
        })
        .collect()
}
