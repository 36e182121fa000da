//! Helpers of the mixed-fleet tests (`dubbo_fleet.rs`): a test's own root in ZooKeeper,
//! and a real Dubbo peer — Apache Dubbo's Python SDK running `tests/python/dubbo_peer.py`.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rpc::config::RegistryConfig;
use rpc::registry::RegistryFormat;
use rpc_testkit::external::Need;
use zookeeper_client::Client as ZkClient;

/// The greeter's service name.
pub const SERVICE: &str = "helloworld.Greeter";

/// One test's place in ZooKeeper: the server, and a root of its own.
pub struct DubboRoot {
    /// `host:port` of the ZooKeeper server.
    pub server: String,
    /// The root, without its leading `/` (Dubbo's registry `group`).
    pub name: String,
}

impl DubboRoot {
    /// A fresh root for `test` on `RPC_TEST_ZOOKEEPER_URL`, or `None` (after saying why)
    /// when ZooKeeper or the Python SDK is missing and not required.
    pub fn new(test: &str) -> Option<(Self, String)> {
        let python = Need::Python.get(test)?;
        let Ok(url) = std::env::var("RPC_TEST_ZOOKEEPER_URL") else {
            assert!(
                std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
                "RPC_TEST_ZOOKEEPER_URL is not set but RPC_TEST_REQUIRE_REGISTRIES is"
            );
            eprintln!(
                "SKIPPED {test}: RPC_TEST_ZOOKEEPER_URL is not set (scripts/test.sh sets it)"
            );
            return None;
        };
        let server = url.trim().trim_start_matches("zookeeper://");
        let server = server.split(['/', '?']).next().unwrap_or(server).to_owned();
        let name = format!("dubbo-{test}-{:08x}", fastrand::u32(..));
        Some((Self { server, name }, python))
    }

    /// Our registry entry for this root in Dubbo's layout.
    pub fn registry(&self) -> RegistryConfig {
        RegistryConfig::new(format!("zookeeper://{}?root=/{}", self.server, self.name))
            .with_format(RegistryFormat::Dubbo)
    }

    /// The Python SDK's registry address for this root.
    pub fn for_python(&self) -> String {
        format!("{}?group={}", self.server, self.name)
    }

    /// The providers directory of the greeter.
    pub fn providers(&self) -> String {
        format!("/{}/{SERVICE}/providers", self.name)
    }

    pub async fn client(&self) -> ZkClient {
        ZkClient::connect(&self.server)
            .await
            .expect("ZooKeeper session")
    }
}

/// A Python Dubbo peer (`dubbo_peer.py`): killed on drop, so nothing outlives a test;
/// its log (stderr) is printed when the test fails.
pub struct PythonPeer {
    child: Child,
    pub stdin: Option<ChildStdin>,
    /// Its stdout, line by line, read by a thread of its own (so every wait is bounded).
    lines: mpsc::Receiver<String>,
    log: tempfile::NamedTempFile,
}

/// Bound on waiting for a line of a peer: its start, its first call, its tally.
pub const LINE_WAIT: Duration = Duration::from_secs(60);

impl PythonPeer {
    pub fn start(python: &str, args: &[&str]) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/dubbo_peer.py");
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("the log file again"))
            .spawn()
            .expect("python runs");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            log,
        }
    }

    /// The next line it prints, waiting at most [`LINE_WAIT`] (blocking: call it through
    /// `spawn_blocking`).
    pub fn line(&mut self) -> String {
        self.lines.recv_timeout(LINE_WAIT).unwrap_or_else(|error| {
            panic!("the Python peer printed no line within {LINE_WAIT:?}: {error}")
        })
    }

    /// Closes its stdin (the signal to finish) and returns its last line; the process is
    /// then killed (a call the SDK never ended keeps a thread of it).
    pub fn finish(mut self) -> String {
        drop(self.stdin.take());
        self.line()
    }
}

impl Drop for PythonPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.log.path()).unwrap_or_default();
            let lines: Vec<_> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(200)..];
            eprintln!(
                "the Python peer's log (its last 200 lines):\n{}",
                tail.join("\n")
            );
        }
    }
}

/// What the Python consumer printed at its end.
#[derive(Debug, serde::Deserialize)]
pub struct Tally {
    /// Calls answered as expected.
    pub ok: u64,
    /// Calls that failed (or did not end within its bound).
    pub failed: u64,
    /// Answered calls by provider (`host:port`).
    pub providers: std::collections::BTreeMap<String, u64>,
    /// Failures by error, as the SDK raised it.
    pub errors: std::collections::BTreeMap<String, u64>,
}

/// The tally the Python consumer printed as `line`.
pub fn tally(line: &str) -> Tally {
    serde_json::from_str(line).unwrap_or_else(|error| panic!("not a tally ({error}): {line}"))
}
