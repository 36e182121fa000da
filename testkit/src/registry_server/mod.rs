//! A registry server process a test owns: etcd, ZooKeeper (through `java`) or rnacos,
//! on free loopback ports in a temporary directory, which the test may stop and start
//! again *on the same ports with the same data* (a registry outage), and which is killed
//! and reaped when its handle drops, also when the test panics.
//!
//! The command lines are those of `scripts/registries.sh` (which starts the servers the
//! other tests share); a test that stops its server must not use that shared one.
//!
//! [`RegistryServer::start_in`] starts one inside a host of the lab of network namespaces
//! (`netlab`), on the host's address and the backend's usual ports, for fault tests
//! across hosts.
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

mod checks;
mod cluster;
mod command;
mod requests;

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use crate::netlab::Host;
use checks::{Endpoint, answers, log_tail};
use command::{Membership, Spec};

/// How long a server may take to answer after it was spawned (ZooKeeper's JVM is the
/// slowest, a few seconds on a busy machine).
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

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

    /// Its usual ports: etcd's client and peer ports, ZooKeeper's client port, Nacos's
    /// HTTP and gRPC ports.
    fn usual_ports(self) -> (u16, u16) {
        match self {
            Backend::Etcd => (2379, 2380),
            Backend::ZooKeeper => (2181, 2888),
            Backend::Nacos => (8848, 9848),
        }
    }
}

/// A registry server process of one test. Dropping it kills and reaps the process and
/// removes its directory.
#[derive(Debug)]
pub struct RegistryServer {
    backend: Backend,
    dir: tempfile::TempDir,
    /// The lab host it runs in; `None`: this machine's loopback.
    host: Option<Host>,
    /// The address it listens on: loopback, or its host's.
    address: Ipv4Addr,
    /// The client port (etcd, ZooKeeper) or HTTP port (Nacos).
    port: u16,
    /// etcd's peer port; Nacos's gRPC port (`port + 1000`, as nacos-sdk expects).
    second_port: u16,
    /// Its place in a cluster; `None`: a server on its own.
    membership: Option<Membership>,
    /// Added to the server's environment.
    env: Vec<(String, String)>,
    child: Option<Child>,
    /// The reads of rnacos's `/nacos/metrics` made by [`RegistryServer::requests_received`]
    /// (rnacos counts each as an HTTP request).
    metrics_reads: std::sync::atomic::AtomicU64,
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
        let mut server = Self::new(backend, None, Ipv4Addr::LOCALHOST, (port, second_port))?;
        server.restart().await?;
        Ok(server)
    }

    /// Starts a server of `backend` inside `host` of a lab, on the host's address and the
    /// backend's usual ports (2379, 2181, 8848), and waits until it answers there.
    ///
    /// # Errors
    /// As [`RegistryServer::start`].
    pub async fn start_in(backend: Backend, host: &Host) -> io::Result<Self> {
        Self::start_in_with(backend, host, &[]).await
    }

    /// As [`RegistryServer::start_in`], with `env` added to the server's environment —
    /// where rnacos reads its settings (`RNACOS_GRPC_DETECTION_TIMEOUT_SECOND`: how long
    /// a silent client's connection lasts before the server probes it, 15 s by default).
    ///
    /// # Errors
    /// As [`RegistryServer::start`].
    pub async fn start_in_with(
        backend: Backend,
        host: &Host,
        env: &[(&str, &str)],
    ) -> io::Result<Self> {
        let mut server = Self::in_host(backend, host)?;
        server.env = env
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        server.restart().await?;
        Ok(server)
    }

    /// `check`, bounded by a second (the default answer — false, 0 — past it), made from
    /// inside the server's lab host when it has one (its address is reachable only
    /// there).
    async fn ask<T: Default + Send + 'static>(
        &self,
        check: impl Future<Output = T> + Send + 'static,
    ) -> T {
        self.ask_within(Duration::from_secs(1), check).await
    }

    /// As [`Self::ask`], bounded by `within`.
    async fn ask_within<T: Default + Send + 'static>(
        &self,
        within: Duration,
        check: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let bounded = async move {
            tokio::time::timeout(within, check)
                .await
                .unwrap_or_default()
        };
        match &self.host {
            None => bounded.await,
            Some(host) => host.run(move || bounded).await,
        }
    }

    /// The lab host it runs in, if any.
    pub fn host(&self) -> Option<&Host> {
        self.host.as_ref()
    }

    /// A server of `backend` in `host`, on the host's address and the usual ports.
    fn in_host(backend: Backend, host: &Host) -> io::Result<Self> {
        Self::new(
            backend,
            Some(host.clone()),
            host.address(),
            backend.usual_ports(),
        )
    }

    fn new(
        backend: Backend,
        host: Option<Host>,
        address: Ipv4Addr,
        (port, second_port): (u16, u16),
    ) -> io::Result<Self> {
        Ok(Self {
            backend,
            dir: tempfile::Builder::new().prefix("rpc-registry-").tempdir()?,
            host,
            address,
            port,
            second_port,
            membership: None,
            env: Vec::new(),
            child: None,
            metrics_reads: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint {
            address: self.address,
            port: self.port,
            second_port: self.second_port,
        }
    }

    /// The URL a client connects with (`etcd://127.0.0.1:PORT`, ...; the host's address
    /// for a server in a lab host).
    pub fn url(&self) -> String {
        format!("{}://{}:{}", self.backend.scheme(), self.address, self.port)
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
        self.spawn_process()?;
        self.wait_ready().await
    }

    /// Runs the server's process (stopping a running one first), without waiting.
    fn spawn_process(&mut self) -> io::Result<()> {
        self.stop();
        // A new process counts from zero.
        *self.metrics_reads.get_mut() = 0;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let mut command = Spec {
            backend: self.backend,
            dir: self.dir.path(),
            host: self.host.as_ref(),
            address: self.address,
            port: self.port,
            second_port: self.second_port,
            membership: self.membership.as_ref(),
        }
        .command()?;
        command.envs(self.env.iter().map(|(key, value)| (key, value)));
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
        Ok(())
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

    /// One health check (see [`RegistryServer::ask`]).
    async fn answers(&self) -> bool {
        let (backend, at) = (self.backend, self.endpoint());
        self.ask(async move { answers(backend, at).await }).await
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        self.stop();
    }
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
