//! A registry server process a test owns: etcd, ZooKeeper (through `java`) or rnacos,
//! on free loopback ports in a temporary directory, which the test may stop and start
//! again *on the same ports with the same data* (a registry outage), and which is killed
//! and reaped when its handle drops, also when the test panics.
//!
//! The command lines are those of `scripts/registries.sh` (which starts the servers the
//! other tests share); a test that stops its server must not use that shared one.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use rpc_testkit::registry_server::{Backend, RegistryServer};
//! let mut server = RegistryServer::start(Backend::Etcd).await?;
//! let url = server.url(); // etcd://127.0.0.1:PORT
//! server.stop();          // the outage begins
//! server.restart().await?; // same port, same data
//! # Ok(()) }
//! ```

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a server may take to answer after it was spawned (ZooKeeper's JVM is the
/// slowest, a few seconds on a busy machine).
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Where ZooKeeper's classes are (Debian's `zookeeper` package), unless
/// `ZOOKEEPER_CLASSPATH` says otherwise.
const ZOOKEEPER_CLASSPATH: &str =
    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

/// Which registry server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `etcd`, one member.
    Etcd,
    /// ZooKeeper standalone, `tickTime` 500 ms (sessions of 1 to 10 s are allowed).
    ZooKeeper,
    /// rnacos, a Nacos-compatible server (its gRPC port is the HTTP port + 1000).
    Nacos,
}

impl Backend {
    /// The scheme of its URLs (`etcd`, `zookeeper`, `nacos`).
    pub fn scheme(self) -> &'static str {
        match self {
            Backend::Etcd => "etcd",
            Backend::ZooKeeper => "zookeeper",
            Backend::Nacos => "nacos",
        }
    }
}

/// A registry server process of one test. Dropping it kills and reaps the process and
/// removes its directory.
#[derive(Debug)]
pub struct RegistryServer {
    backend: Backend,
    dir: tempfile::TempDir,
    /// The client port (etcd, ZooKeeper) or HTTP port (Nacos).
    port: u16,
    /// etcd's peer port; Nacos's gRPC port (`port + 1000`, as nacos-sdk expects).
    second_port: u16,
    child: Option<Child>,
}

impl RegistryServer {
    /// Starts a server of `backend` on free loopback ports and waits until it answers.
    ///
    /// # Errors
    /// The binary is missing (`etcd`, `java`, `rnacos` on PATH or in `~/.cargo/bin`, or
    /// `RNACOS`), no free port was found, or the server did not answer within
    /// [`READY_TIMEOUT`] (the error quotes the end of its log).
    pub async fn start(backend: Backend) -> io::Result<Self> {
        let (port, second_port) = match backend {
            Backend::Nacos => free_port_pair(1000)?,
            _ => (free_port()?, free_port()?),
        };
        let mut server = Self {
            backend,
            dir: tempfile::Builder::new().prefix("rpc-registry-").tempdir()?,
            port,
            second_port,
            child: None,
        };
        server.restart().await?;
        Ok(server)
    }

    /// The URL a client connects with (`etcd://127.0.0.1:PORT`, ...).
    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.backend.scheme(), self.port)
    }

    /// Which server this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the process (SIGKILL, as a crash or a lost machine) and reaps it; its data
    /// stays for [`RegistryServer::restart`]. Nothing happens if it is not running.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again, on the same ports with the same data, and waits until it
    /// answers. A running process is stopped first.
    ///
    /// # Errors
    /// As [`RegistryServer::start`]; a port another process took in the meantime shows
    /// as a server that exits during start-up.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.stop();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let mut command = self.command()?;
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.child = Some(command.spawn().map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot run the {} server: {error}", self.backend.scheme()),
            )
        })?);
        self.wait_ready().await
    }

    /// Starts the process again on the same ports but with no data, as a server
    /// replaced by a new one: every lease, session and registration it held is gone.
    ///
    /// # Errors
    /// As [`RegistryServer::restart`], or the data could not be removed.
    pub async fn restart_without_data(&mut self) -> io::Result<()> {
        self.stop();
        for data in ["etcd-data", "zookeeper-data", "nacos-data"] {
            let path = self.dir.path().join(data);
            if path.exists() {
                std::fs::remove_dir_all(path)?;
            }
        }
        self.restart().await
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn command(&self) -> io::Result<Command> {
        let dir = self.dir.path();
        let command = match self.backend {
            Backend::Etcd => {
                let client = format!("http://127.0.0.1:{}", self.port);
                let peer = format!("http://127.0.0.1:{}", self.second_port);
                let mut command = Command::new("etcd");
                command
                    .args(["--name", "rpc-test", "--data-dir"])
                    .arg(dir.join("etcd-data"))
                    .args(["--listen-client-urls", &client])
                    .args(["--advertise-client-urls", &client])
                    .args(["--listen-peer-urls", &peer])
                    .args(["--initial-advertise-peer-urls", &peer])
                    .args(["--initial-cluster", &format!("rpc-test={peer}")]);
                command
            }
            Backend::ZooKeeper => {
                let config = dir.join("zoo.cfg");
                std::fs::create_dir_all(dir.join("zookeeper-data"))?;
                std::fs::write(
                    &config,
                    format!(
                        "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={}\n\
                         clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
                         4lw.commands.whitelist=ruok,isro\n",
                        dir.join("zookeeper-data").display(),
                        self.port
                    ),
                )?;
                let classpath = std::env::var("ZOOKEEPER_CLASSPATH")
                    .unwrap_or_else(|_| ZOOKEEPER_CLASSPATH.to_owned());
                let mut command = Command::new("java");
                command
                    .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
                    .args(["-cp", &classpath])
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(config);
                command
            }
            Backend::Nacos => {
                let mut command = Command::new(rnacos()?);
                command
                    .env("RNACOS_SDK_HOST", "127.0.0.1")
                    .env("RNACOS_HTTP_PORT", self.port.to_string())
                    .env("RNACOS_GRPC_PORT", self.second_port.to_string())
                    .env("RNACOS_HTTP_CONSOLE_PORT", "0")
                    .env("RNACOS_DATA_DIR", dir.join("nacos-data"))
                    .env(
                        "RNACOS_RAFT_NODE_ADDR",
                        format!("127.0.0.1:{}", self.second_port),
                    );
                command
            }
        };
        Ok(command)
    }

    /// Polls the server's own health check every 100 ms until it passes, the process
    /// exits, or [`READY_TIMEOUT`] passes.
    async fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if self.answers().await {
                return Ok(());
            }
            let exited = match self.child.as_mut() {
                Some(child) => child.try_wait()?.is_some(),
                None => true,
            };
            if exited || Instant::now() >= deadline {
                self.stop();
                let why = if exited {
                    "exited during start-up"
                } else {
                    "did not answer in time"
                };
                return Err(io::Error::other(format!(
                    "the {} server on port {} {why}; its log ends with:\n{}",
                    self.backend.scheme(),
                    self.port,
                    log_tail(&self.log_path())
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One health check, bounded by a second.
    async fn answers(&self) -> bool {
        let check = async {
            match self.backend {
                // A linearizable read through etcd's gRPC gateway: answered only once
                // the member has a leader.
                Backend::Etcd => {
                    http_ok(self.port, "POST", "/v3/kv/range", r#"{"key":"AA=="}"#).await
                }
                // `isro` answers `rw` only once the server serves sessions (`ruok`'s
                // `imok` comes earlier, while it still loads its data).
                Backend::ZooKeeper => four_letter_word(self.port, b"isro", b"rw").await,
                Backend::Nacos => {
                    http_ok(
                        self.port,
                        "GET",
                        "/nacos/v1/ns/service/list?pageNo=1&pageSize=1",
                        "",
                    )
                    .await
                        && TcpStream::connect((Ipv4Addr::LOCALHOST, self.second_port))
                            .await
                            .is_ok()
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(1), check)
            .await
            .unwrap_or(false)
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The rnacos binary: `RNACOS`, then PATH, then `~/.cargo/bin`.
fn rnacos() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os("RNACOS") {
        return Ok(path.into());
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("rnacos"))
        .find(|path| path.is_file());
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    on_path
        .or_else(|| {
            cargo_home
                .map(|home| home.join("bin/rnacos"))
                .filter(|path| path.is_file())
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "rnacos not found on PATH nor in ~/.cargo/bin (cargo install rnacos --locked, or set RNACOS)",
            )
        })
}

/// A loopback port nobody listens on now (bound, then released).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// Two free loopback ports `offset` apart (Nacos: HTTP and gRPC = HTTP + 1000).
fn free_port_pair(offset: u16) -> io::Result<(u16, u16)> {
    for _ in 0..100 {
        let first = free_port()?;
        let Some(second) = first.checked_add(offset) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, second)).is_ok() {
            return Ok((first, second));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no two free loopback ports {offset} apart"),
    ))
}

/// Whether an HTTP/1.1 request to 127.0.0.1:`port` is answered with a 200.
async fn http_ok(port: u16, method: &str, path: &str, body: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await else {
        return false;
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && head.ends_with(b" 200")
}

/// Whether ZooKeeper answers the four-letter `word` with `answer`.
async fn four_letter_word(port: u16, word: &[u8], answer: &[u8]) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await else {
        return false;
    };
    if stream.write_all(word).await.is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply).await;
    reply == answer
}

/// The last lines of a server's log, for an error message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
