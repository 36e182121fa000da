//! The greeter-provider binary under real signals: SIGTERM → graceful exit 0; a second
//! SIGINT / SIGTERM during shutdown → 130 / 143; SIGHUP does not stop it; a shutdown that
//! had to cut a call → 1.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;

const BINARY: &str = env!("CARGO_BIN_EXE_greeter-provider");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.yaml");

struct Provider {
    child: Child,
    addr: String,
    stderr: BufReader<ChildStderr>,
    _stdout: BufReader<ChildStdout>,
}

impl Provider {
    /// Starts the binary with extra environment overrides and waits for its address.
    fn start(env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(BINARY)
            .args(["--config", CONFIG])
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("greeter-provider starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        Self {
            child,
            addr,
            stderr,
            _stdout: stdout,
        }
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }

    /// Reads the log until a line contains `needle` (so the next signal is a second one).
    fn wait_for_log(&mut self, needle: &str) {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stderr.read_line(&mut line).unwrap() > 0,
                "log ended before `{needle}`"
            );
            if line.contains(needle) {
                return;
            }
        }
    }

    fn exit_code(mut self) -> i32 {
        // Bounded: the configured shutdown timeout is 25 s.
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().expect("exited, not killed");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("greeter-provider did not exit within 30 s");
    }

    fn say_hello(&self) -> String {
        let addr = format!("http://{}", self.addr);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut client = GreeterClient::connect(addr).await.unwrap();
            let request = HelloRequest {
                name: "signals".into(),
                count: 0,
            };
            client
                .say_hello(request)
                .await
                .unwrap()
                .into_inner()
                .message
        })
    }
}

/// Long enough that a second signal certainly lands during the sequence.
const SLOW_WINDOW: [(&str, &str); 1] = [(
    "RPC_GRACEFUL_SHUTDOWN__OFFLINE_REQUEST_WINDOW_TIMEOUT",
    "3s",
)];

#[test]
fn sigterm_shuts_down_cleanly_with_exit_code_0() {
    let provider = Provider::start(&[]);
    assert_eq!(provider.say_hello(), "Hello, signals!");
    provider.signal(Signal::SIGTERM);
    assert_eq!(provider.exit_code(), 0);
}

#[test]
fn a_second_sigint_exits_130() {
    let mut provider = Provider::start(&SLOW_WINDOW);
    provider.signal(Signal::SIGINT);
    provider.wait_for_log("starting graceful shutdown");
    provider.signal(Signal::SIGINT);
    assert_eq!(provider.exit_code(), 130);
}

#[test]
fn a_second_sigterm_exits_143() {
    let mut provider = Provider::start(&SLOW_WINDOW);
    provider.signal(Signal::SIGTERM);
    provider.wait_for_log("starting graceful shutdown");
    provider.signal(Signal::SIGTERM);
    assert_eq!(provider.exit_code(), 143);
}

#[test]
fn sighup_does_not_shut_down() {
    let mut provider = Provider::start(&[]);
    provider.signal(Signal::SIGHUP);
    provider.wait_for_log("SIGHUP received");
    assert_eq!(
        provider.say_hello(),
        "Hello, signals!",
        "still serving after SIGHUP"
    );
    provider.signal(Signal::SIGTERM);
    assert_eq!(provider.exit_code(), 0);
}

#[test]
fn a_forced_shutdown_exits_1() {
    let provider = Provider::start(&[("RPC_GRACEFUL_SHUTDOWN__STEP_TIMEOUT", "300ms")]);
    // A call whose request never ends (its message never comes): the handler waits for
    // it past every bound, and step 6 must cut it. (A peer that merely never answers
    // the GOAWAY's PING, with nothing in flight, no longer forces anything: issue 12.)
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _call = runtime.block_on(async {
        let socket = tokio::net::TcpStream::connect(&provider.addr)
            .await
            .unwrap();
        let (send, connection) = h2::client::handshake(socket).await.unwrap();
        tokio::spawn(connection);
        let mut send = send.ready().await.unwrap();
        let request = http::Request::post(format!(
            "http://{}/helloworld.Greeter/SayHello",
            provider.addr
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
        send.send_request(request, false).unwrap()
    });
    provider.signal(Signal::SIGTERM);
    assert_eq!(provider.exit_code(), 1);
}

#[test]
fn with_internal_signal_false_no_handler_is_installed() {
    use std::os::unix::process::ExitStatusExt;
    let mut provider = Provider::start(&[("RPC_GRACEFUL_SHUTDOWN__INTERNAL_SIGNAL", "false")]);
    provider.signal(Signal::SIGTERM);
    // The default disposition ends the process: the framework did not intercept it.
    let status = provider.child.wait().unwrap();
    assert_eq!(status.signal(), Some(Signal::SIGTERM as i32), "{status:?}");
}

#[test]
fn sigterm_during_start_up_stops_at_once_and_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("slow-start.yaml");
    // Registration waits an hour after the service is ready (delay export).
    std::fs::write(
        &config,
        "graceful_shutdown: { internal_signal: true }\nprovider:\n  services:\n    helloworld.Greeter: { delay: 1h }\n",
    )
    .unwrap();
    let mut child = Command::new(BINARY)
        .args(["--config".as_ref(), config.as_os_str()])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "log ended before serving"
        );
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(rest.contains("stopped during start-up"), "{rest}");
}
