//! Programs of the lab's tests as processes of their own, each started inside a host
//! with `ip netns exec`: the echo provider (`src/bin/lab_echo_provider.rs`) and the
//! consumer (`src/bin/lab_echo_consumer.rs`). Needed where a library keeps one set of
//! connections for the whole process (nacos-sdk's runtime): as threads of the test, every
//! program's registry traffic would leave from one host. Each process is killed with its
//! process group when its handle is dropped, whatever the test did; they are configured
//! by a file of the test's `Config`, written as JSON (which YAML reads). `Program::spawn`
//! starts one outside the lab too (`connection_flood.rs`: under `ulimit -n`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rpc::Config;
use rpc::config::RegistryConfig;
use rpc_testkit::netlab::Host;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, timeout};

use rpc_tests::lab_load::{Tally, WORK_MS};

/// Bound on a process's start, on its stop, and on each line awaited from it.
const STEP: Duration = Duration::from_secs(60);
/// Bound on each wait for the consumer's directory to change.
const CONVERGE: Duration = Duration::from_secs(90);

/// A process group of the test (every generation of a hot-upgraded provider joins it:
/// a successor is its parent's child): killed when dropped.
pub struct ProcessGroup {
    group: u32,
}

impl ProcessGroup {
    /// Whether the process that started the group (its leader, the first generation of a
    /// provider that upgrades in place) has exited: gone, or a zombie nobody has reaped
    /// yet (its output is read until every generation closed it).
    pub fn leader_exited(&self) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", self.group)) {
            // The state follows the command name in parentheses: `123 (name) Z ...`.
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
            Err(_) => true,
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.group)])
            // A group whose every process has exited already is not worth a line.
            .stderr(Stdio::null())
            .status();
    }
}

/// A program started inside a host: its group, its standard input, and the lines it
/// prints (each echoed to the test's output under `name`).
pub struct Program {
    pub group: ProcessGroup,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::UnboundedReceiver<String>,
}

impl Program {
    /// Starts `binary` with `args` on `host`.
    pub fn start(name: &'static str, host: &Host, binary: &str, args: &[&str]) -> Self {
        let mut command = tokio::process::Command::new("ip");
        command
            .args(["netns", "exec", host.namespace(), binary])
            .args(args);
        Self::spawn(name, command)
    }

    /// Starts `command` (in a process group of its own, killed when dropped).
    pub fn spawn(name: &'static str, mut command: tokio::process::Command) -> Self {
        let mut child = command
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(false)
            .spawn()
            .expect("the program starts");
        let group = ProcessGroup {
            group: child.id().expect("a running child has a pid"),
        };
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let (lines_tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                println!("{name}: {line}");
                let _ = lines_tx.send(line);
            }
            let _ = child.wait().await;
        });
        Self {
            group,
            stdin,
            lines,
        }
    }

    /// Waits for its next line that starts with `prefix`; the rest of it.
    pub async fn line_starting(&mut self, prefix: &str) -> String {
        let lines = &mut self.lines;
        timeout(STEP, async {
            while let Some(line) = lines.recv().await {
                if let Some(rest) = line.strip_prefix(prefix) {
                    return rest.to_owned();
                }
            }
            panic!("the program's output ended before `{prefix}`");
        })
        .await
        .unwrap_or_else(|_| panic!("no `{prefix}` from the program in time"))
    }
}

/// `config` written where a process of the test reads it.
pub fn config_file(dir: &Path, name: &str, config: &Config) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    let text = serde_json::to_string_pretty(config).expect("a configuration serialises");
    std::fs::write(&path, text).expect("the configuration is written");
    path
}

/// `config` registered and discovering at the registry `url`.
pub fn with_registry(mut config: Config, url: &str) -> Config {
    config
        .registries
        .insert("default".to_owned(), RegistryConfig::new(url.to_owned()));
    config
}

/// An echo provider process (20 ms of work per call) on a host of the lab.
pub struct ProviderProcess {
    /// Where it serves (host:port), as its answers name it.
    pub address: String,
    host: Host,
    /// Its admin endpoint, on its host's loopback (any port: an old and a new provider
    /// share a host during a roll).
    admin: std::net::SocketAddr,
    pid: String,
    program: Program,
    _config: tempfile::TempDir,
}

impl ProviderProcess {
    /// Starts one on `host`, registered at `url`; returns once it serves.
    pub async fn start(host: &Host, url: &str) -> Self {
        assert_eq!(WORK_MS, 20, "the provider process works 20 ms a call");
        let mut config = with_registry(super::config("provider"), url);
        config.protocol.host = host.address().to_string();
        config.admin.host = "127.0.0.1".to_owned();
        config.admin.port = 0;
        config.graceful_shutdown.internal_signal = true;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = config_file(dir.path(), "provider", &config);
        let mut program = Program::start(
            "provider",
            host,
            env!("CARGO_BIN_EXE_lab_echo_provider"),
            &[path.to_str().expect("a UTF-8 path")],
        );
        let pid = program.line_starting("pid ").await;
        let address = program.line_starting("serving ").await;
        let admin = program
            .line_starting("admin ")
            .await
            .parse()
            .expect("an admin address");
        Self {
            address,
            host: host.clone(),
            admin,
            pid,
            program,
            _config: dir,
        }
    }

    /// Takes it offline without stopping it (`POST /offline` on its admin endpoint, from
    /// inside its host, as an operator would): it unregisters and keeps serving.
    pub async fn offline(&self) {
        let admin = self.admin;
        let answer = timeout(
            STEP,
            self.host
                .run(move || async move { rpc_testkit::http::post(admin, "/offline", None).await }),
        )
        .await
        .expect("the admin endpoint answers in time")
        .expect("the admin endpoint answers");
        assert_eq!(answer.status, 200, "offline: {}", answer.body);
    }

    /// Pauses it (SIGSTOP): its sockets stay open and its kernel still acknowledges
    /// what arrives, but nothing answers — a process stopped by a debugger, a VM
    /// suspended, a very long GC pause.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused process run on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .args([signal, &self.pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "{signal} reaches the provider");
    }

    /// Stops it gracefully (SIGTERM, as an init system would); its shutdown report.
    pub async fn stop(mut self) -> String {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM reaches the provider");
        self.program.line_starting("shutdown ").await
    }
}

/// A consumer process on a host of the lab, sending the lab's load from its start.
pub struct ConsumerProcess {
    listed: watch::Receiver<BTreeSet<String>>,
    stdin: ChildStdin,
    tallies: tokio::task::JoinHandle<Vec<Tally>>,
    _group: ProcessGroup,
    _config: tempfile::TempDir,
}

impl ConsumerProcess {
    /// Starts one on `host` with `config`, sending `rate` calls a second; returns once
    /// it has started.
    pub async fn start(host: &Host, config: &Config, rate: u32) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = config_file(dir.path(), "consumer", config);
        let mut program = Program::start(
            "consumer",
            host,
            env!("CARGO_BIN_EXE_lab_echo_consumer"),
            &[path.to_str().expect("a UTF-8 path"), &rate.to_string()],
        );
        program.line_starting("pid ").await;
        let (listed_tx, listed) = watch::channel(BTreeSet::new());
        let mut lines = program.lines;
        let tallies = tokio::spawn(async move {
            let mut tallies = Vec::new();
            while let Some(line) = lines.recv().await {
                if let Some(addresses) = line.strip_prefix("listed ") {
                    let now = addresses.split(',').filter(|a| !a.is_empty());
                    listed_tx.send_replace(now.map(str::to_owned).collect());
                } else if let Some(tally) = line.strip_prefix("tally ") {
                    tallies.push(Tally::from_line(tally).expect("a tally line parses"));
                } else if line.starts_with("shutdown ") {
                    break;
                }
            }
            tallies
        });
        Self {
            listed,
            stdin: program.stdin.expect("piped"),
            tallies,
            _group: program.group,
            _config: dir,
        }
    }

    /// What its directory lists now.
    pub fn listed(&self) -> BTreeSet<String> {
        self.listed.borrow().clone()
    }

    /// Waits until its directory lists exactly `expected`; how long that took.
    pub async fn until_listed(&mut self, expected: &[&str]) -> Duration {
        let expected: BTreeSet<String> = expected.iter().map(|a| (*a).to_owned()).collect();
        let started = Instant::now();
        let converged = timeout(CONVERGE, self.listed.wait_for(|now| *now == expected))
            .await
            .map(|listed| listed.map(|_| ()));
        match converged {
            Ok(running) => running.expect("the consumer runs"),
            Err(_) => panic!("the directory lists {:?}, not {expected:?}", self.listed()),
        }
        started.elapsed()
    }

    /// Tallies the calls sent from now on under `phase`.
    pub async fn phase(&mut self, phase: usize) {
        self.stdin
            .write_all(format!("phase {phase}\n").as_bytes())
            .await
            .expect("the consumer reads its phases");
        self.stdin
            .flush()
            .await
            .expect("the consumer reads its phases");
    }

    /// Ends the load; the tally of each phase, once every call has ended and the
    /// consumer has stopped.
    pub async fn end(self) -> Vec<Tally> {
        drop(self.stdin);
        timeout(STEP, self.tallies)
            .await
            .expect("the consumer ends in time")
            .expect("the consumer's output is read")
    }
}
