//! Registry servers as a cluster, one member inside each of several lab hosts: a 3-member
//! etcd cluster, a ZooKeeper ensemble, or rnacos's raft cluster.

use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::time::Instant;

use super::checks::{ask_to_join, change_voters, is_leader, log_tail, raft_members, raft_summary};
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
                // is left a non-voter), through its leader.
                member.wait_ready().await?;
                members.push(member);
                join(&members).await?;
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

/// How long a joining rnacos member is given to be counted among the voters before the
/// membership change is asked again.
const JOIN_WAIT: Duration = Duration::from_secs(10);

/// Makes the last of `members` an rnacos raft voter, for at most [`READY_TIMEOUT`]: the
/// first member (the founder) is waited on until it leads, then asked to take the last
/// (`joinnode`), then waited on until it counts every member among its voters. After a
/// [`JOIN_WAIT`] without that, a join that was not answered is asked again, and one that
/// was is followed by a membership change asked of the leader (rnacos's join ignores an
/// error of its own membership change). Asking twice is harmless: rnacos refuses a join
/// or change it already has (async-raft's `Noop`).
///
/// The test asks, not the joining member: rnacos's own join request is sent once, at
/// start, and is lost for good if the first member does not lead yet, and asking again
/// by restarting the member fails for good once the first request was taken (seen in CI:
/// "the first member counts 1 voters" after a minute).
async fn join(members: &[RegistryServer]) -> io::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let first = &members[0];
    let at = first.endpoint();
    while !first
        .ask(async move { is_leader(Backend::Nacos, at).await })
        .await
    {
        if Instant::now() >= deadline {
            return Err(io::Error::other(format!(
                "the first rnacos member did not lead in time; {}",
                join_state(members).await
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if members.len() == 1 {
        return Ok(());
    }
    let joining = &members[members.len() - 1];
    // Raft ids count from 1, in start order (`command.rs`).
    let id = members.len();
    let raft_address = format!("{}:{}", joining.address, joining.second_port);
    let mut asked = false;
    loop {
        if !asked {
            let raft_address = raft_address.clone();
            asked = first
                .ask_within(
                    deadline.saturating_duration_since(Instant::now()),
                    async move { ask_to_join(at, id, raft_address).await },
                )
                .await;
        } else {
            let voters: Vec<usize> = (1..=members.len()).collect();
            first
                .ask(async move { change_voters(at, voters).await })
                .await;
        }
        let counted = counted(members, Instant::now() + JOIN_WAIT).await;
        if counted >= members.len() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(join_error(members, counted).await);
        }
    }
}

/// The error for a member of `members` not counted in time, with what each says.
async fn join_error(members: &[RegistryServer], counted: usize) -> io::Error {
    io::Error::other(format!(
        "rnacos member {} did not join the cluster in time (the first member counts {counted} voters); {}",
        members.len(),
        join_state(members).await
    ))
}

/// What each of `members` says of its raft, and the end of the last one's log.
async fn join_state(members: &[RegistryServer]) -> String {
    let mut state = String::new();
    for member in members {
        let at = member.endpoint();
        let summary = member.ask(async move { raft_summary(at).await }).await;
        state.push_str(&format!("member at {}: {summary}; ", at.address));
    }
    let (first, joining) = (&members[0], &members[members.len() - 1]);
    format!(
        "{state}the first one's log ends with:\n{}\nthe last one's log ends with:\n{}",
        log_tail(&first.log_path()),
        log_tail(&joining.log_path())
    )
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
