//! Faults of a host as nftables rules in its namespace: a table `lab` of its own,
//! replaced whole by each fault and deleted to restore.

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// What a host's network does wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// Every packet in and out is dropped, silently: to its peers the host vanished
    /// (no reset, no ICMP), as a host whose power or link was cut.
    Blackhole,
    /// Packets to and from `peer` only are dropped, silently.
    CutFrom(Ipv4Addr),
    /// A share (0 to 1) of the packets in and out is dropped at random.
    Loss(f64),
}

impl Fault {
    pub(super) fn apply(self, namespace: &str) {
        let rules = match self {
            Self::Blackhole => "drop".to_owned(),
            Self::CutFrom(peer) => format!("ip saddr {peer} drop\n ip daddr {peer} drop"),
            Self::Loss(share) => {
                let per_thousand = (share.clamp(0.0, 1.0) * 1000.0).round() as u32;
                format!("numgen random mod 1000 < {per_thousand} drop")
            }
        };
        Self::clear(namespace);
        let ruleset = format!(
            "table inet lab {{\n chain input {{ type filter hook input priority 0; policy accept;\n {rules}\n }}\n \
             chain output {{ type filter hook output priority 0; policy accept;\n {rules}\n }}\n}}\n"
        );
        nft(namespace, &["-f", "-"], Some(&ruleset)).expect("nftables takes the fault's rules");
    }

    pub(super) fn clear(namespace: &str) {
        // Fails when there is no table: nothing to restore.
        let _ = nft(namespace, &["delete", "table", "inet", "lab"], None);
    }
}

fn nft(namespace: &str, args: &[&str], input: Option<&str>) -> Result<(), String> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", namespace, "nft"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| error.to_string())?;
    if let Some(text) = input {
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(text.as_bytes())
            .map_err(|error| error.to_string())?;
    }
    drop(child.stdin.take());
    let output = child
        .wait_with_output()
        .map_err(|error| error.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}
