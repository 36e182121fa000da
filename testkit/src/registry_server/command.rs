//! The command line of a registry server: one etcd member, ZooKeeper server or rnacos,
//! alone or as a member of a cluster on several lab hosts, run inside its lab host when
//! it has one.

use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Backend;
use crate::netlab::Host;

/// Where ZooKeeper's classes are (Debian's `zookeeper` package), unless
/// `ZOOKEEPER_CLASSPATH` says otherwise.
const ZOOKEEPER_CLASSPATH: &str =
    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

/// ZooKeeper's ports between the servers of an ensemble: quorum and leader election.
const ZOOKEEPER_QUORUM_PORTS: (u16, u16) = (2888, 3888);

/// One member's place in a cluster: its index, and every member's address (each on the
/// backend's usual ports).
#[derive(Clone, Debug)]
pub(super) struct Membership {
    pub(super) index: usize,
    pub(super) addresses: Vec<Ipv4Addr>,
}

/// What a server's command line is made of.
pub(super) struct Spec<'a> {
    pub(super) backend: Backend,
    pub(super) dir: &'a Path,
    pub(super) host: Option<&'a Host>,
    pub(super) address: Ipv4Addr,
    pub(super) port: u16,
    pub(super) second_port: u16,
    pub(super) membership: Option<&'a Membership>,
}

impl Spec<'_> {
    /// The command that runs the server (inside its lab host when it has one).
    pub(super) fn command(&self) -> io::Result<Command> {
        let command = match self.backend {
            Backend::Etcd => self.etcd(),
            Backend::ZooKeeper => self.zookeeper()?,
            Backend::Nacos => self.nacos()?,
        };
        Ok(self.in_host(command))
    }

    fn etcd(&self) -> Command {
        let client = format!("http://{}:{}", self.address, self.port);
        let peer = format!("http://{}:{}", self.address, self.second_port);
        let (name, cluster) = match self.membership {
            None => ("rpc-test".to_owned(), format!("rpc-test={peer}")),
            Some(membership) => (
                format!("m{}", membership.index),
                membership
                    .addresses
                    .iter()
                    .enumerate()
                    .map(|(index, address)| {
                        format!("m{index}=http://{address}:{}", self.second_port)
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        };
        let mut command = Command::new("etcd");
        command
            .args(["--name", &name, "--data-dir"])
            .arg(self.dir.join("etcd-data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &cluster])
            .args(["--initial-cluster-token", "rpc-test"]);
        command
    }

    fn zookeeper(&self) -> io::Result<Command> {
        let config = self.dir.join("zoo.cfg");
        let data = self.dir.join("zookeeper-data");
        std::fs::create_dir_all(&data)?;
        let mut text = format!(
            "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={}\n\
             clientPortAddress={}\nadmin.enableServer=false\n\
             4lw.commands.whitelist=ruok,isro,srvr\n",
            data.display(),
            self.port,
            self.address,
        );
        if let Some(membership) = self.membership {
            let (quorum, election) = ZOOKEEPER_QUORUM_PORTS;
            for (index, address) in membership.addresses.iter().enumerate() {
                text.push_str(&format!(
                    "server.{}={address}:{quorum}:{election}\n",
                    index + 1
                ));
            }
            std::fs::write(data.join("myid"), format!("{}\n", membership.index + 1))?;
        }
        std::fs::write(&config, text)?;
        let classpath =
            std::env::var("ZOOKEEPER_CLASSPATH").unwrap_or_else(|_| ZOOKEEPER_CLASSPATH.to_owned());
        let mut command = Command::new("java");
        command
            .arg(format!("-Dzookeeper.log.dir={}", self.dir.display()))
            .args(["-cp", &classpath])
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(config);
        Ok(command)
    }

    fn nacos(&self) -> io::Result<Command> {
        let mut command = Command::new(rnacos()?);
        command
            .env("RNACOS_SDK_HOST", self.address.to_string())
            .env("RNACOS_HTTP_PORT", self.port.to_string())
            .env("RNACOS_GRPC_PORT", self.second_port.to_string())
            .env("RNACOS_HTTP_CONSOLE_PORT", "0")
            .env("RNACOS_DATA_DIR", self.dir.join("nacos-data"))
            .env(
                "RNACOS_RAFT_NODE_ADDR",
                format!("{}:{}", self.address, self.second_port),
            );
        // A cluster: the first member founds it; each other one waits, without asking to
        // join, until the test asks the first to take it (`cluster.rs`): rnacos's own
        // join request is sent once and lost if the first is not yet leader.
        if let Some(membership) = self.membership {
            command
                .env("RNACOS_RAFT_NODE_ID", (membership.index + 1).to_string())
                .env(
                    "RNACOS_RAFT_AUTO_INIT",
                    if membership.index == 0 {
                        "true"
                    } else {
                        "false"
                    },
                );
        }
        Ok(command)
    }

    /// `command`, run inside the server's lab host when it has one (`ip netns exec`
    /// execs the program, so the child's pid is the server's).
    fn in_host(&self, command: Command) -> Command {
        let Some(host) = self.host else {
            return command;
        };
        let mut inside = Command::new("ip");
        inside
            .args(["netns", "exec", host.namespace()])
            .arg(command.get_program())
            .args(command.get_args());
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                inside.env(key, value);
            }
        }
        inside
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
