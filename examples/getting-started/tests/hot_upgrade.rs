//! The getting-started provider, exactly as the guide writes it, hot-upgraded against a
//! real etcd (`RPC_TEST_ETCD_URL`, set by scripts/test.sh): first by SIGUSR2, then by
//! `POST /upgrade` on the admin address the first generation bound (the second
//! generation serves it on the inherited socket).
//!
//! Its `main` exits 1 on any start-up error, and the configuration check a hot upgrade
//! runs first (`RPC_UPGRADE=check`) ends `start()` with `ApplicationError::Checked`: the
//! upgrade goes ahead only because the checking process reports its outcome to the old
//! one over a descriptor, whatever exit code `main` then chooses. Each generation serves
//! the same gRPC port, the last one is found through etcd by the guide's consumer, and
//! every old generation finishes its upgrade as `succeeded`.
//!
//! Every process the test starts (and any process they started) is killed when the test
//! ends, also when it fails. Without `RPC_TEST_ETCD_URL` the test says it was skipped,
//! unless `RPC_TEST_REQUIRE_REGISTRIES` is set: then it fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use getting_started::hello::HelloRequest;
use getting_started::hello::greeter_client::GreeterClient;

/// Bound on every wait of this test.
const BOUND: Duration = Duration::from_secs(30);

/// A command for one of the project's binaries, run from the project's directory (the
/// YAML paths are relative to it) against etcd at `url`, on free ports.
fn command(binary: &str, url: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RPC_REGISTRIES__MAIN__URL", url)
        .env("RPC_PROTOCOL__PORT", "0")
        .env("RPC_ADMIN__PORT", "0")
        .env_remove("RUST_LOG");
    command
}

/// The provider's generations: the first (this test's child) and the pids of the later
/// ones. Dropping it kills every one still running, and whatever they started.
struct Generations {
    first: u32,
    /// The first generation's exit status, once it has exited (a thread waits for it).
    first_exit: Receiver<ExitStatus>,
    later: Vec<u32>,
}

impl Generations {
    /// Starts the first generation; its stderr (and that of every later generation,
    /// which inherits it) is read into the returned [`Log`].
    fn start(url: &str) -> (Self, Log) {
        let mut child: Child = command(env!("CARGO_BIN_EXE_hello-provider"), url)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hello-provider starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let first = child.id();
        let (exited, first_exit) = channel();
        std::thread::spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = exited.send(status);
            }
        });
        let (lines, received) = channel();
        std::thread::spawn(move || {
            // Ends at EOF: when every process holding the pipe has exited.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    return;
                }
            }
        });
        let generations = Self {
            first,
            first_exit,
            later: Vec::new(),
        };
        let log = Log {
            lines: received,
            seen: Vec::new(),
        };
        (generations, log)
    }

    /// The first generation's exit status, once it has exited.
    fn first_exit(&self) -> ExitStatus {
        self.first_exit
            .recv_timeout(BOUND)
            .unwrap_or_else(|error| panic!("the first generation did not exit: {error}"))
    }
}

impl Drop for Generations {
    fn drop(&mut self) {
        for pid in std::iter::once(self.first).chain(self.later.iter().copied()) {
            kill_tree(pid);
        }
    }
}

/// Kills `pid` and, first, every process it started (a configuration check, a new
/// generation not yet recorded), if it still runs.
fn kill_tree(pid: u32) {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
        kill_tree(child);
    }
    if running(pid) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// Whether `pid` runs (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// `kill -SIGNAL pid`, with the system's kill(1).
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// The providers' log lines, read in order.
struct Log {
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    /// Reads lines until one satisfies `wanted`, and returns it; fails at once on an
    /// upgrade that failed or was refused, after [`BOUND`], or when every provider
    /// process has exited first.
    fn until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                    if line.contains("upgrade failed") || line.contains("upgrade refused") {
                        panic!("waiting for {what}:\n{}", self.tail());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} within {BOUND:?}:\n{}", self.tail())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("no {what}: every provider exited:\n{}", self.tail())
                }
            }
        }
    }

    /// Reads until every provider process has exited (the pipe's EOF).
    fn until_all_exited(&mut self) {
        let deadline = Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("a provider still runs after {BOUND:?}:\n{}", self.tail())
                }
            }
        }
    }

    fn tail(&self) -> String {
        let from = self.seen.len().saturating_sub(60);
        self.seen[from..].join("\n")
    }
}

/// The value of `key=` in a log line (up to the next space).
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let pattern = format!(" {key}=");
    let at = line
        .find(&pattern)
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        + pattern.len();
    line[at..].split_whitespace().next().unwrap_or_default()
}

/// `hello.Greeter/SayHello` on `port`, directly (not through the registry).
fn say_hello(port: u16, name: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let call = async {
            let mut client = GreeterClient::connect(format!("http://127.0.0.1:{port}")).await?;
            let request = HelloRequest { name: name.into() };
            let reply = client.say_hello(request).await?;
            Ok::<_, Box<dyn std::error::Error>>(reply.into_inner().message)
        };
        match tokio::time::timeout(BOUND, call).await {
            Ok(Ok(message)) => message,
            Ok(Err(error)) => panic!("SayHello on port {port}: {error}"),
            Err(_) => panic!("SayHello on port {port}: no answer within {BOUND:?}"),
        }
    })
}

/// `POST path` on the admin endpoint: the status code and the body.
fn post(admin: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(admin).expect("the admin endpoint accepts");
    stream.set_read_timeout(Some(BOUND)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("the admin endpoint answers");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The number after `"key":` in a JSON text.
fn json_number(json: &str, key: &str) -> Option<u32> {
    let pattern = format!("\"{key}\":");
    let at = json.find(&pattern)? + pattern.len();
    let digits: String = json[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn etcd_url() -> Option<String> {
    match std::env::var("RPC_TEST_ETCD_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            assert!(
                std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
                "RPC_TEST_ETCD_URL is not set but RPC_TEST_REQUIRE_REGISTRIES is"
            );
            println!("SKIPPED: RPC_TEST_ETCD_URL is not set (scripts/test.sh starts etcd)");
            None
        }
    }
}

#[test]
fn the_guides_provider_is_hot_upgraded_by_sigusr2_then_by_post_upgrade() {
    let Some(url) = etcd_url() else {
        return;
    };
    let (mut generations, mut log) = Generations::start(&url);
    let admin_line = log.until("admin endpoint", |l| l.contains("admin endpoint listening"));
    let admin: SocketAddr = field(&admin_line, "addr").parse().unwrap();
    let serving = log.until("gRPC listener", |l| {
        l.contains("lossless_rpc_lifecycle::startup: serving")
    });
    let port: u16 = field(&serving, "addr")
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap();
    log.until("serving phase", |l| l.contains("to=serving"));
    assert_eq!(say_hello(port, "first"), "Hello, first!");

    // 1. SIGUSR2, as `systemctl reload` sends it.
    signal(generations.first, "USR2");
    let started = log.until("a new process", |l| l.contains("new process started"));
    let second: u32 = field(&started, "pid").parse().unwrap();
    generations.later.push(second);
    let finished = log.until("the end of the first upgrade", |l| {
        l.contains("upgrade finished; this process exits")
    });
    assert!(finished.contains("report=succeeded"), "{finished}");
    assert!(
        generations.first_exit().success(),
        "the first generation exits 0"
    );
    log.until("the second generation alone", |l| {
        l.contains("the previous generation has exited")
    });
    assert_eq!(say_hello(port, "second"), "Hello, second!");

    // 2. POST /upgrade, to the admin address the first generation bound: the second
    //    one answers on the socket it inherited.
    let (status, body) = post(admin, "/upgrade");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"succeeded\""), "{body}");
    let third = json_number(&body, "new_pid").unwrap_or_else(|| panic!("no new_pid: {body}"));
    generations.later.push(third);
    assert!(third != second && third != generations.first, "{body}");
    let finished = log.until("the end of the second upgrade", |l| {
        l.contains("upgrade finished; this process exits")
    });
    assert!(finished.contains("report=succeeded"), "{finished}");
    log.until("the third generation alone", |l| {
        l.contains("the previous generation has exited")
    });
    assert!(!running(second), "the second generation has exited");
    assert_eq!(say_hello(port, "third"), "Hello, third!");

    // The guide's consumer finds the third generation through etcd.
    let consumer = command(env!("CARGO_BIN_EXE_hello-consumer"), &url)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&consumer.stdout);
    let err = String::from_utf8_lossy(&consumer.stderr);
    assert!(consumer.status.success(), "{out}\n{err}");
    assert_eq!(out.trim(), "Hello, world!");

    // SIGTERM: the last generation shuts down gracefully, and then no provider is left.
    signal(third, "TERM");
    let report = log.until("the shutdown's report", |l| {
        l.contains("graceful shutdown finished")
    });
    assert!(report.contains("report=clean"), "{report}");
    log.until_all_exited();
}
