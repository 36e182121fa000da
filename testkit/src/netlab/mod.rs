//! A lab of hosts as Linux network namespaces, for fault tests across hosts.
//!
//! Each host is a network namespace of its own (`ip netns`, iproute2) with one address
//! on a /24, its `eth0` a veth whose other end sits on a bridge inside a switch
//! namespace — also the lab's own, so nothing of the lab touches the machine's own
//! network: no address, link or rule is made outside namespaces the lab created. A
//! test's programs run inside a host ([`Host::run`]: a thread that entered the host's
//! namespace, with a tokio runtime of its own, so every socket it opens is the host's).
//!
//! Faults are nftables rules in a host's namespace (`faults.rs`): cut it off entirely
//! without a reset (blackhole), or cut only its traffic with one other host, and restore
//! it; loss is a `numgen random` rule. The kernels of these machines have no `netem`
//! qdisc (nor nftables' `queue`), so delay is a TCP relay of the lab's own on a host
//! ([`Relay`]), which programs dial instead of their peer.
//!
//! A lab removes its namespaces when dropped, also while a panic unwinds; namespaces of
//! a run that was killed (named `rpclab-<pid>-<n>-…` for a pid no longer alive) are removed
//! by the next lab. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), `ip` and `nft`.

mod faults;
mod host;
mod relay;

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use faults::Fault;
pub use host::Host;
pub use relay::Relay;

/// Prefix of every namespace a lab makes.
pub const PREFIX: &str = "rpclab-";

/// Why a lab cannot be built here.
#[derive(Debug, thiserror::Error)]
#[error("no network-namespace lab on this machine: {0}")]
pub struct LabUnavailable(String);

/// A small network of hosts; removed when dropped.
#[derive(Debug)]
pub struct Lab {
    switch: String,
    hosts: Vec<Host>,
}

impl Lab {
    /// A lab of `hosts` hosts (at most 200), addressed `10.77.N.1`, `10.77.N.2`, … —
    /// `N` the lab's number in this process (modulo 256), so that labs side by side
    /// never share an address: a client library that keeps process-wide state by
    /// server address (nacos-sdk does) would otherwise join them.
    ///
    /// # Errors
    /// [`LabUnavailable`] when namespaces cannot be made (not root, no `ip`) or `nft`
    /// is missing.
    pub fn new(hosts: usize) -> Result<Self, LabUnavailable> {
        assert!(hosts <= 200, "a lab holds at most 200 hosts");
        for tool in ["ip", "nft"] {
            let found = Command::new(tool)
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                return Err(LabUnavailable(format!("`{tool}` is not installed")));
            }
        }
        sweep_stale();
        // The pid for the sweep, and a number for labs of one process side by side.
        static LABS: AtomicUsize = AtomicUsize::new(0);
        let number = LABS.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{}-{number}", std::process::id());
        let subnet = (number % 256) as u8;
        let mut lab = Self {
            switch: format!("{name}-sw"),
            hosts: Vec::new(),
        };
        ip(&["netns", "add", &lab.switch]).map_err(LabUnavailable)?;
        in_ns(&lab.switch, &["ip", "link", "add", "br0", "type", "bridge"])
            .and_then(|()| in_ns(&lab.switch, &["ip", "link", "set", "br0", "up"]))
            .map_err(LabUnavailable)?;
        for index in 0..hosts {
            let host = Host::new(
                format!("{name}-h{index}"),
                Ipv4Addr::new(10, 77, subnet, index as u8 + 1),
            );
            // Pushed before it is wired, so that a failure half-way still removes it.
            lab.hosts.push(host);
            lab.wire(index).map_err(LabUnavailable)?;
        }
        Ok(lab)
    }

    /// A lab for `test`, or `None` after one `SKIPPED` line when this machine cannot
    /// build one — unless `RPC_TEST_REQUIRE_NETNS` is set (to anything but `0`), as in
    /// CI (`scripts/test.sh`), where that is a failure.
    ///
    /// # Panics
    /// When the lab cannot be built and is required.
    pub fn for_test(test: &str, hosts: usize) -> Option<Self> {
        match Self::new(hosts) {
            Ok(lab) => Some(lab),
            Err(error) => {
                let required = std::env::var("RPC_TEST_REQUIRE_NETNS")
                    .is_ok_and(|value| !value.is_empty() && value != "0");
                assert!(!required, "{test}: {error} (RPC_TEST_REQUIRE_NETNS is set)");
                println!("SKIPPED {test}: {error} (needs root, iproute2 and nftables)");
                None
            }
        }
    }

    /// Every namespace the lab made: the switch's, then each host's.
    pub fn namespaces(&self) -> Vec<String> {
        std::iter::once(self.switch.clone())
            .chain(self.hosts.iter().map(|host| host.namespace().to_owned()))
            .collect()
    }

    /// Host `index` (0-based).
    pub fn host(&self, index: usize) -> &Host {
        &self.hosts[index]
    }

    /// Makes host `index`'s namespace and links it to the bridge.
    fn wire(&self, index: usize) -> Result<(), String> {
        let host = &self.hosts[index];
        let port = format!("p{index}");
        ip(&["netns", "add", host.namespace()])?;
        ip(&[
            "link",
            "add",
            "eth0",
            "netns",
            host.namespace(),
            "type",
            "veth",
            "peer",
            "name",
            &port,
            "netns",
            &self.switch,
        ])?;
        in_ns(
            &self.switch,
            &["ip", "link", "set", &port, "master", "br0", "up"],
        )?;
        let address = format!("{}/24", host.address());
        in_ns(
            host.namespace(),
            &["ip", "addr", "add", &address, "dev", "eth0"],
        )?;
        in_ns(host.namespace(), &["ip", "link", "set", "eth0", "up"])?;
        in_ns(host.namespace(), &["ip", "link", "set", "lo", "up"])
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of each veth, and so the pair.
        for host in &self.hosts {
            let _ = ip(&["netns", "del", host.namespace()]);
        }
        let _ = ip(&["netns", "del", &self.switch]);
    }
}

/// Removes the namespaces of labs whose process is gone.
fn sweep_stale() {
    let Ok(listed) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&listed.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Runs `ip ARGS`; its error output when it fails.
fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args)
}

/// Runs `COMMAND…` inside namespace `namespace`.
fn in_ns(namespace: &str, command: &[&str]) -> Result<(), String> {
    let mut args = vec!["netns", "exec", namespace];
    args.extend_from_slice(command);
    run("ip", &args)
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| format!("{program}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}
