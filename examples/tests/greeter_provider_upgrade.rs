//! greeter-provider as systemd runs it, for the hot upgrade: started by *socket
//! activation* (the listening socket passed as descriptor 3 with `LISTEN_FDS`, as a
//! `.socket` unit does), it serves on that socket; under a fake `NOTIFY_SOCKET`, SIGUSR2
//! (what `systemctl reload` sends with `ExecReload=kill -USR2 $MAINPID`) is told as
//! `RELOADING=1` with `MONOTONIC_USEC`, then `MAINPID=<new>` with `READY=1`, and the old
//! process exits 0. Every process is stopped by the test, also when it fails.

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;

const BINARY: &str = env!("CARGO_BIN_EXE_greeter-provider");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.yaml");
/// systemd's way of setting `LISTEN_PID` to the pid of the program it starts.
const WITH_LISTEN_PID: &str = r#"LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@""#;
/// Bound on every wait of these tests.
const BOUND: Duration = Duration::from_secs(30);

/// A provider process, and any later generation it handed over to: all stopped on drop.
struct Processes {
    first: Child,
    later: Vec<i32>,
}

impl Drop for Processes {
    fn drop(&mut self) {
        for pid in &self.later {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let _ = self.first.kill();
        let _ = self.first.wait();
    }
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
fn exited(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_exited(pid: i32) {
    let deadline = Instant::now() + BOUND;
    while !exited(pid) {
        assert!(
            Instant::now() < deadline,
            "pid {pid} still runs after {BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a line");
    line.trim().to_owned()
}

#[tokio::test]
async fn socket_activation_serves_on_the_socket_it_was_given() {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", WITH_LISTEN_PID, BINARY, "--config", CONFIG])
        // systemd names a socket after its unit unless FileDescriptorName= says otherwise.
        .env("LISTEN_FDS", "1")
        .env("LISTEN_FDNAMES", "greeter.socket")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
        .fd_mappings(vec![FdMapping {
            parent_fd: OwnedFd::from(socket),
            child_fd: 3,
        }])
        .unwrap();
    let mut processes = Processes {
        first: command.spawn().expect("greeter-provider starts"),
        later: Vec::new(),
    };
    // The command held this process's copy of the socket: only the provider has it now.
    drop(command);

    assert_eq!(
        first_line(&mut processes.first),
        format!("listening on {addr}")
    );
    let mut client = GreeterClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let reply = client
        .say_hello(HelloRequest {
            name: "activation".to_owned(),
            count: 0,
        })
        .await
        .expect("served on the inherited socket");
    assert!(reply.into_inner().message.contains("activation"));

    kill(Pid::from_raw(processes.first.id() as i32), Signal::SIGTERM).unwrap();
    let status = processes.first.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// Receives datagrams into `heard` until a line satisfies `wanted`; that line.
fn hear(socket: &UnixDatagram, heard: &mut Vec<String>, wanted: impl Fn(&str) -> bool) -> String {
    let mut buffer = [0u8; 4096];
    loop {
        if let Some(line) = heard.iter().flat_map(|d| d.lines()).find(|l| wanted(l)) {
            return line.to_owned();
        }
        let len = socket
            .recv(&mut buffer)
            .unwrap_or_else(|error| panic!("nothing more heard ({error}); heard {heard:#?}"));
        heard.push(String::from_utf8_lossy(&buffer[..len]).into_owned());
    }
}

#[test]
fn sigusr2_is_told_to_systemd_as_reloading_then_the_new_main_pid_ready() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(BOUND)).unwrap();
    let mut processes = Processes {
        first: Command::new(BINARY)
            .args(["--config", CONFIG])
            .env("NOTIFY_SOCKET", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("greeter-provider starts"),
        later: Vec::new(),
    };
    let old = processes.first.id() as i32;
    let mut heard = Vec::new();
    hear(&socket, &mut heard, |l| l == "READY=1");

    kill(Pid::from_raw(old), Signal::SIGUSR2).unwrap();
    let main_pid = hear(&socket, &mut heard, |l| l.starts_with("MAINPID="));
    let new: i32 = main_pid["MAINPID=".len()..].parse().unwrap();
    processes.later.push(new);
    assert_ne!(new, old);

    let reloading = heard
        .iter()
        .position(|d| d.lines().any(|l| l == "RELOADING=1"))
        .unwrap_or_else(|| panic!("no RELOADING=1: {heard:#?}"));
    assert!(
        heard[reloading].contains("MONOTONIC_USEC="),
        "RELOADING=1 carries MONOTONIC_USEC: {heard:#?}"
    );
    let handed_over = heard.iter().position(|d| d.contains("MAINPID=")).unwrap();
    assert!(reloading < handed_over, "{heard:#?}");
    assert!(
        heard[handed_over].lines().any(|l| l == "READY=1"),
        "MAINPID comes with READY=1: {heard:#?}"
    );

    let status = processes.first.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the old generation exits 0");
    assert!(!exited(new), "the new generation serves");
    kill(Pid::from_raw(new), Signal::SIGTERM).unwrap();
    wait_exited(new);
}

/// Receives datagrams into `heard` until one from index `from` on has a line satisfying
/// `wanted`; that datagram's index.
fn hear_from(
    socket: &UnixDatagram,
    heard: &mut Vec<String>,
    from: usize,
    wanted: impl Fn(&str) -> bool,
) -> usize {
    let mut buffer = [0u8; 4096];
    loop {
        if let Some(at) = (from..heard.len()).find(|&i| heard[i].lines().any(&wanted)) {
            return at;
        }
        let len = socket
            .recv(&mut buffer)
            .unwrap_or_else(|error| panic!("nothing more heard ({error}); heard {heard:#?}"));
        heard.push(String::from_utf8_lossy(&buffer[..len]).into_owned());
    }
}

/// greeter-provider under a fake notify socket, with `env` overriding its configuration.
fn notified_provider(notify: &std::path::Path, env: &[(&str, &str)]) -> Processes {
    let mut command = Command::new(BINARY);
    command
        .args(["--config", CONFIG])
        .env("NOTIFY_SOCKET", notify)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    Processes {
        first: command.spawn().expect("greeter-provider starts"),
        later: Vec::new(),
    }
}

/// Issue 25, point 5: with `internal_signal: false` the application owns SIGTERM and
/// SIGINT, but SIGUSR2 (what `systemctl reload` sends) still runs the upgrade instead of
/// its default action ending the process.
#[test]
fn with_internal_signal_off_sigusr2_still_upgrades() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(BOUND)).unwrap();
    let mut processes = notified_provider(
        &path,
        &[("RPC_GRACEFUL_SHUTDOWN__INTERNAL_SIGNAL", "false")],
    );
    let old = processes.first.id() as i32;
    let mut heard = Vec::new();
    hear(&socket, &mut heard, |l| l == "READY=1");

    kill(Pid::from_raw(old), Signal::SIGUSR2).unwrap();
    let main_pid = hear(&socket, &mut heard, |l| l.starts_with("MAINPID="));
    let new: i32 = main_pid["MAINPID=".len()..].parse().unwrap();
    processes.later.push(new);
    assert_ne!(new, old);
    wait_exited(old);
    let status = processes.first.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "the old generation handed over and exited 0"
    );
    assert!(!exited(new), "the new generation serves");
    // The application owns SIGTERM here (greeter-provider does not handle it): the
    // default action ends the new generation.
    kill(Pid::from_raw(new), Signal::SIGTERM).unwrap();
    wait_exited(new);
}

/// Issue 25, point 5: `upgrade.enabled: false` refuses every trigger with the reason. A
/// SIGUSR2 is logged, and answered `RELOADING=1` then `READY=1` at once, so that a
/// `systemctl reload` (`Type=notify-reload`) ends instead of waiting for its timeout;
/// `POST /upgrade` answers 409; the process serves on and stops cleanly.
#[test]
fn turned_off_the_upgrade_is_refused_with_the_reason_and_the_process_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(BOUND)).unwrap();
    let mut processes = notified_provider(&path, &[("RPC_UPGRADE__ENABLED", "false")]);
    let pid = processes.first.id() as i32;
    let mut heard = Vec::new();
    let ready = hear_from(&socket, &mut heard, 0, |l| l == "READY=1");
    let stdout = processes.first.stdout.take().expect("stdout is piped");
    let mut stdout = BufReader::new(stdout).lines();
    let addr = stdout.next().unwrap().unwrap();
    let admin = stdout.next().unwrap().unwrap();
    let addr = addr
        .strip_prefix("listening on ")
        .expect("the address")
        .to_owned();
    let admin: std::net::SocketAddr = admin
        .strip_prefix("admin listening on ")
        .expect("the admin address")
        .parse()
        .unwrap();

    kill(Pid::from_raw(pid), Signal::SIGUSR2).unwrap();
    let reloading = hear_from(&socket, &mut heard, ready + 1, |l| l == "RELOADING=1");
    assert!(
        heard[reloading].contains("MONOTONIC_USEC="),
        "RELOADING=1 carries MONOTONIC_USEC: {heard:#?}"
    );
    hear_from(&socket, &mut heard, reloading + 1, |l| l == "READY=1");
    assert!(
        !heard.iter().any(|d| d.contains("MAINPID=")),
        "nothing was handed over: {heard:#?}"
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime
        .block_on(rpc_testkit::http::post(admin, "/upgrade", None))
        .expect("the admin endpoint answers");
    assert_eq!(answer.status, 409, "{}", answer.body);
    assert!(answer.body.contains("\"disabled\""), "{}", answer.body);
    assert!(
        answer.body.contains("upgrade.enabled: false"),
        "{}",
        answer.body
    );
    let reply = runtime.block_on(async {
        let mut client = GreeterClient::connect(format!("http://{addr}")).await?;
        let request = HelloRequest {
            name: "still here".to_owned(),
            count: 0,
        };
        client.say_hello(request).await.map_err(Into::into)
    });
    let reply: Result<_, Box<dyn std::error::Error>> = reply;
    assert!(
        reply
            .expect("served")
            .into_inner()
            .message
            .contains("still here")
    );

    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    wait_exited(pid);
    let status = processes.first.wait().unwrap();
    let mut log = String::new();
    if let Some(mut stderr) = processes.first.stderr.take() {
        use std::io::Read;
        let _ = stderr.read_to_string(&mut log);
    }
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("upgrade refused"), "{log}");
    assert!(log.contains("upgrade.enabled: false"), "{log}");
}
