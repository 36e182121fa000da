//! greeter-provider under a fake systemd: a Unix datagram socket the test binds and
//! names in `NOTIFY_SOCKET`, as systemd does for a `Type=notify` unit. The process is a
//! real provider application going through start-up and, on SIGTERM, the graceful
//! shutdown; the socket must hear READY=1, the phases as STATUS=, and STOPPING=1, in
//! that order. Each provider is a child process with its own environment, so the
//! process-global `NOTIFY_SOCKET` never leaks into another test.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BINARY: &str = env!("CARGO_BIN_EXE_greeter-provider");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.yaml");
/// `graceful_shutdown.timeout` in `CONFIG`.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(25);

/// A provider child, killed if the test fails before it exited.
struct Provider(Child);

impl Provider {
    fn start(notify_socket: &Path) -> Self {
        let child = Command::new(BINARY)
            .args(["--config", CONFIG])
            .env("NOTIFY_SOCKET", notify_socket)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("greeter-provider starts");
        Self(child)
    }

    /// Reads stdout until the provider printed its address, which it does once serving.
    fn wait_until_serving(&mut self) {
        let stdout = self.0.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert!(line.starts_with("listening on "), "first line {line:?}");
    }

    fn terminate(&self) {
        kill(Pid::from_raw(self.0.id() as i32), Signal::SIGTERM).unwrap();
    }

    /// The exit code and everything the process logged.
    fn wait(mut self) -> (Option<i32>, String) {
        let mut log = String::new();
        if let Some(mut stderr) = self.0.stderr.take() {
            let _ = stderr.read_to_string(&mut log);
        }
        let status = self.0.wait().unwrap();
        (status.code(), log)
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Receives datagrams into `heard` until one has the line `line`. Bounded by the
/// socket's read timeout.
fn hear_until(socket: &UnixDatagram, heard: &mut Vec<String>, line: &str) {
    let mut buffer = [0u8; 4096];
    while !heard.iter().any(|d| d.lines().any(|l| l == line)) {
        let len = socket
            .recv(&mut buffer)
            .unwrap_or_else(|error| panic!("no `{line}` ({error}); heard {heard:#?}"));
        heard.push(String::from_utf8_lossy(&buffer[..len]).into_owned());
    }
}

/// Where the first line equal to `line` is, counting lines over all datagrams.
fn position(lines: &[&str], line: &str) -> usize {
    lines
        .iter()
        .position(|l| *l == line)
        .unwrap_or_else(|| panic!("`{line}` never sent; lines {lines:#?}"))
}

#[test]
fn greeter_provider_tells_systemd_ready_its_phases_and_stopping_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    // Bounds the test: start-up takes well under a second, the shutdown of an idle
    // provider about one offline window (500 ms).
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let provider = Provider::start(&path);

    let mut heard = Vec::new();
    hear_until(&socket, &mut heard, "READY=1");
    provider.terminate();
    hear_until(&socket, &mut heard, "STATUS=stopped");
    let (code, log) = provider.wait();
    assert_eq!(code, Some(0), "{log}");

    let lines: Vec<&str> = heard.iter().flat_map(|d| d.lines()).collect();
    let starting = position(&lines, "STATUS=starting");
    let ready = position(&lines, "READY=1");
    let serving = position(&lines, "STATUS=serving");
    let stopping = position(&lines, "STOPPING=1");
    let unregistering = position(&lines, "STATUS=unregistering");
    let draining = position(&lines, "STATUS=draining-inbound");
    let stopped = position(&lines, "STATUS=stopped");
    assert!(starting < ready && ready < serving, "{lines:#?}");
    assert!(serving < stopping && stopping < unregistering, "{lines:#?}");
    assert!(unregistering < draining && draining < stopped, "{lines:#?}");
    assert_eq!(
        stopped,
        lines.len() - 1,
        "nothing after `stopped`: {lines:#?}"
    );
    assert_eq!(
        lines.iter().filter(|l| **l == "READY=1").count(),
        1,
        "{lines:#?}"
    );

    // STOPPING=1 comes with the extension: never more than the shutdown's own bound
    // plus the margin.
    let stopping_datagram = heard.iter().find(|d| d.contains("STOPPING=1")).unwrap();
    let extension: u64 = stopping_datagram
        .lines()
        .find_map(|l| l.strip_prefix("EXTEND_TIMEOUT_USEC="))
        .expect("STOPPING=1 carries EXTEND_TIMEOUT_USEC")
        .parse()
        .unwrap();
    let most = (SHUTDOWN_TIMEOUT + lossless_rpc::systemd::STOP_MARGIN).as_micros() as u64;
    assert!(
        extension > lossless_rpc::systemd::STOP_MARGIN.as_micros() as u64 && extension <= most,
        "{extension}"
    );
}

/// A notify socket that is gone (systemd restarted, a stale variable) costs a log line,
/// never the service.
#[test]
fn a_dead_notify_socket_does_not_stop_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let mut provider = Provider::start(&dir.path().join("nobody-listens"));
    provider.wait_until_serving();
    provider.terminate();
    let (code, log) = provider.wait();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("systemd notification failed"), "{log}");
}
