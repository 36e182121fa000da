//! The interop binaries as the spec runs them: `interop-client --server_host
//! --server_port --test_case all` against `interop-server --port`, one line per case,
//! exit 0; a case that fails makes the client exit 1; a bad flag exits 2; the server
//! leaves cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rpc_testkit::interop::case::{Case, Verdict, parse_line};

const SERVER: &str = env!("CARGO_BIN_EXE_interop-server");
const CLIENT: &str = env!("CARGO_BIN_EXE_interop-client");

/// Kills the server if the test ends before it stopped it (a failed assertion).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn client(args: &[&str]) -> std::process::Output {
    Command::new(CLIENT)
        .args(args)
        .output()
        .expect("interop-client runs")
}

#[test]
fn the_client_binary_passes_every_case_against_the_server_binary() {
    let mut server = Command::new(SERVER)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("interop-server starts");
    let mut stdout = BufReader::new(server.stdout.take().expect("piped stdout"));
    let mut server = KillOnDrop(server);
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .expect("the server prints its address");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let mut admin = String::new();
    stdout
        .read_line(&mut admin)
        .expect("the server prints its admin address");
    assert!(admin.starts_with("admin listening on "), "{admin:?}");

    let output = client(&[
        "--server_host",
        host,
        "--server_port",
        port,
        "--test_case",
        "all",
    ]);
    let printed = String::from_utf8_lossy(&output.stdout);
    println!("{printed}{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<_> = printed.lines().filter_map(parse_line).collect();
    assert_eq!(lines.len(), Case::ALL.len(), "one line per case");
    assert!(lines.iter().all(|(_, verdict)| *verdict == Verdict::Pass));
    assert_eq!(output.status.code(), Some(0));

    let one = client(&["--server_port", port, "--test_case", "ping_pong"]);
    assert_eq!(String::from_utf8_lossy(&one.stdout), "PASS ping_pong\n");

    kill(Pid::from_raw(server.0.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    let status = server.0.wait().expect("the server exits");
    let mut rest = String::new();
    while stdout.read_line(&mut rest).unwrap_or(0) > 0 {}
    assert!(rest.starts_with("shutdown clean"), "{rest}");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_failed_case_exits_1_and_bad_flags_exit_2() {
    // A port nothing listens on: the reference starts (a static registry knows the
    // address), every call then fails.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = unused.local_addr().expect("its address").port().to_string();
    drop(unused);
    let output = client(&["--server_port", &port, "--test_case", "empty_unary"]);
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.starts_with("FAIL empty_unary: "), "{printed}");
    assert_eq!(output.status.code(), Some(1));

    let unknown = client(&["--server_port", &port, "--test_case", "no_such_case"]);
    assert_eq!(unknown.status.code(), Some(2));
    let no_server = client(&["--test_case", "empty_unary"]);
    assert_eq!(no_server.status.code(), Some(2));
}
