//! Registry servers as a cluster, one member inside each of several lab hosts: a 3-member
//! etcd cluster, a ZooKeeper ensemble, or rnacos's raft cluster.

use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::time::Instant;

use super::checks::{heard_from_leader, is_leader, raft_members};
use super::command::Membership;
use super::{Backend, READY_TIMEOUT, RegistryServer};
use crate::netlab::Host;

impl RegistryServer {
    /// Starts a cluster of `backend`, one member inside each of `hosts` (an etcd cluster,
    /// a ZooKeeper ensemble, an rnacos raft cluster), each on its host's address and the
    /// usual ports, and waits until every member answers — etcd and ZooKeeper members
    /// answer once the cluster has a leader; rnacos's are waited on one at a time, each
    /// until the first member counts it among the raft's voters.
    ///
    /// # Errors
    /// As [`RegistryServer::start`]; for rnacos also a member that did not join within
    /// [`READY_TIMEOUT`].
    pub async fn start_cluster(backend: Backend, hosts: &[Host]) -> io::Result<Vec<Self>> {
        let addresses: Vec<Ipv4Addr> = hosts.iter().map(Host::address).collect();
        let mut members = Vec::with_capacity(hosts.len());
        for (index, host) in hosts.iter().enumerate() {
            let mut member = Self::in_host(backend, host)?;
            member.membership = Some(Membership {
                index,
                addresses: addresses.clone(),
            });
            member.spawn_process()?;
            if backend == Backend::Nacos {
                // rnacos's raft takes one joining member at a time (two at once: one
                // is left a non-voter), and a member asks to join only once, at start
                // (a request lost then is not sent again): a member not counted in time
                // is started again, and asks again.
                member.wait_ready().await?;
                members.push(member);
                join(&mut members).await?;
            } else {
                // Every member runs before any is waited on: none answers without a
                // quorum.
                members.push(member);
            }
        }
        for member in &mut members {
            member.wait_ready().await?;
        }
        Ok(members)
    }

    /// The URL a client of the cluster `members` connects with: every member's address.
    pub fn cluster_url(members: &[Self]) -> String {
        let scheme = members.first().map_or("etcd", |m| m.backend.scheme());
        let addresses: Vec<String> = members
            .iter()
            .map(|member| format!("{}:{}", member.address, member.port))
            .collect();
        format!("{scheme}://{}", addresses.join(","))
    }

    /// Whether this member leads its cluster now (as it answers itself; false when it
    /// does not answer).
    pub async fn is_leader(&self) -> bool {
        let (backend, at) = (self.backend, self.endpoint());
        self.ask(async move { is_leader(backend, at).await }).await
    }
}

/// How long a joining rnacos member is given before it is started again.
const JOIN_WAIT: Duration = Duration::from_secs(10);

/// Waits until the first of `members` counts every one of them among rnacos's raft
/// voters, for at most [`READY_TIMEOUT`]. The last one, once not counted for a
/// [`JOIN_WAIT`], is started again without its data (it asks to join again) — only if
/// its request was lost: no leader has contacted it.
///
/// A join the leader has taken is not asked again. The leader adds the member as a
/// non-voter and brings it up to date before it makes it a voter, which on a loaded
/// machine can outlast a `JOIN_WAIT`; a second request for the same member id is then
/// refused (async-raft answers `Noop` for a non-voter being synced, and rnacos's join
/// handler gives up on that error before it changes the membership), so a member
/// restarted then would never be counted (seen in CI: "the first member counts 1
/// voters" after a minute of restarts).
async fn join(members: &mut [RegistryServer]) -> io::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let counted = counted(members, Instant::now() + JOIN_WAIT).await;
        if counted >= members.len() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(io::Error::other(format!(
                "rnacos member {} did not join the cluster in time (the first member counts {counted} voters)",
                members.len()
            )));
        }
        let joining = &mut members[members.len() - 1];
        let at = joining.endpoint();
        if !joining
            .ask(async move { heard_from_leader(at).await })
            .await
        {
            joining.restart_without_data().await?;
        }
    }
}

/// How many voters the first of `members` counts, polled every 100 ms until it counts
/// them all or `until` passes.
async fn counted(members: &[RegistryServer], until: Instant) -> usize {
    let first = &members[0];
    loop {
        let at = first.endpoint();
        let count = first.ask(async move { raft_members(at).await }).await;
        if count >= members.len() || Instant::now() >= until {
            return count;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
