//! Clustered registries losing their leader during a rolling deploy (issue 26, scenario
//! 6), in a lab of network namespaces (`rpc_testkit::netlab`): a 3-member etcd cluster
//! and a 3-server ZooKeeper ensemble, one member per host (hosts 0 to 2), two echo
//! providers (hosts 3 and 4) and a consumer sending 500 idempotent calls/s of 20 ms
//! (host 5), every program given all three members' addresses.
//!
//! The leader is lost — killed (SIGKILL, as a crashed machine), or in a second run
//! partitioned (its host blackholed: no reset, its clients must time out) — and then:
//!
//! 1. for a lease/session time and more nothing else happens: the registrations made
//!    before must survive the leader change (the consumer's directory never shrinks);
//! 2. both providers are replaced one after the other (start the new, stop the old):
//!    their registrations and unregistrations go through the surviving members, so the
//!    programs' clients followed the new leader;
//! 3. the consumer's directory lists exactly the two new providers, they take calls,
//!    and no call failed in any phase.
//!
//! No Nacos cluster: rnacos can form one (raft), but the lab cannot run nacos-sdk's
//! programs in-process (see `lab_registry.rs`).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::lab::{
    Discovery, Provider, answered_by, assert_none_failed, consumer_on, until_listed,
};
use rpc_testkit::netlab::{Fault, Lab};
use rpc_testkit::registry_server::{Backend, RegistryServer};
use rpc_tests::lab_load::listed;
use tokio::time::{Instant, timeout};

/// Lease time-to-live (etcd) and session timeout (ZooKeeper) of every program.
const LIVENESS: Duration = Duration::from_secs(9);
/// How long each steady phase of the script lasts.
const STEADY: Duration = Duration::from_secs(2);
/// Bound on finding the cluster's leader.
const ELECTION: Duration = Duration::from_secs(30);
/// Nothing in these tests may take longer.
const BOUND: Duration = Duration::from_secs(240);

/// How the leader is lost.
#[derive(Clone, Copy, Debug)]
enum Loss {
    /// Its process is killed.
    Killed,
    /// Its host drops every packet, in and out.
    Partitioned,
}

/// The index of the member that leads now.
async fn leader(members: &[RegistryServer]) -> usize {
    timeout(ELECTION, async {
        loop {
            for (index, member) in members.iter().enumerate() {
                if member.is_leader().await {
                    return index;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the cluster has a leader")
}

/// The cluster's URL for the lab's programs: leases and sessions of [`LIVENESS`], with
/// the default request timeout (3 s) — the shipped defaults' proportion (10 s and 3 s),
/// so that a client whose member went silent gives up on it, and renews through
/// another, within the lease. (With a lease no longer than the request timeout, a
/// renewal stuck on a silent member outlives the lease: seen here with 3 s and 3 s.)
fn url(backend: Backend, members: &[RegistryServer]) -> String {
    let liveness = match backend {
        Backend::Etcd => "ttl",
        _ => "session_timeout",
    };
    format!(
        "{}?{liveness}={}s",
        RegistryServer::cluster_url(members),
        LIVENESS.as_secs()
    )
}

async fn leader_lost_during_a_rolling_deploy(test: &str, backend: Backend, loss: Loss) {
    common::logs();
    let Some(lab) = Lab::for_test(test, 6) else {
        return;
    };
    let hosts = [0, 1, 2].map(|index| lab.host(index).clone());
    let Some(mut members) = common::lab::registry_cluster_in(test, backend, &hosts).await else {
        return;
    };
    let discovery = Discovery::Url(url(backend, &members));
    let old = [
        Provider::start(lab.host(3), discovery.clone()).await,
        Provider::start(lab.host(4), discovery.clone()).await,
    ];
    let old_addresses: Vec<String> = old.iter().map(|p| p.address.clone()).collect();
    let script = async {
        let (directory, phase, load) = consumer_on(lab.host(5), &discovery).await;
        until_listed(&directory, &[&old[0].address, &old[1].address]).await;
        tokio::time::sleep(STEADY).await;
        // 1: the leader is lost; the registrations must outlive it.
        let lost = leader(&members).await;
        match loss {
            Loss::Killed => members[lost].stop(),
            Loss::Partitioned => lab.host(lost).apply(Fault::Blackhole),
        }
        phase.send_replace(1);
        let before: BTreeSet<String> = old_addresses.iter().cloned().collect();
        let quiet_until = Instant::now() + LIVENESS + STEADY;
        while Instant::now() < quiet_until {
            assert_eq!(
                listed(&directory),
                before,
                "the registrations outlive the leader"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let survivors: Vec<&RegistryServer> = members
            .iter()
            .enumerate()
            .filter_map(|(index, member)| (index != lost).then_some(member))
            .collect();
        let mut survivor_leads = false;
        for member in &survivors {
            if member.is_leader().await {
                survivor_leads = true;
                break;
            }
        }
        // 2: the rolling deploy, through the surviving members.
        phase.send_replace(2);
        let mut new = Vec::new();
        for (provider, host) in old.into_iter().zip([3, 4]) {
            new.push(Provider::start(lab.host(host), discovery.clone()).await);
            provider.stop().await;
        }
        let converged = until_listed(&directory, &[&new[0].address, &new[1].address]).await;
        // 3: the new providers serve.
        phase.send_replace(3);
        tokio::time::sleep(STEADY).await;
        drop(phase);
        (lost, survivor_leads, converged, new, load.await)
    };
    let (lost, survivor_leads, converged, new, tallies) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    let new_addresses: Vec<String> = new.iter().map(|p| p.address.clone()).collect();
    for provider in new {
        provider.stop().await;
    }
    if let Loss::Partitioned = loss {
        lab.host(lost).restore();
    }
    println!(
        "{test}: member {lost} led and was {loss:?}; a surviving member led after: {}; \
         the directory listed the new providers {converged:?} after the roll",
        survivor_leads
    );
    for (phase, tally) in tallies.iter().enumerate() {
        println!("{test}: phase {phase}: {tally:?}");
    }
    assert_none_failed(test, &tallies);
    assert_eq!(tallies.len(), 4, "every phase sent calls");
    assert!(survivor_leads, "the survivors elected a leader");
    for address in &new_addresses {
        assert!(
            answered_by(&tallies[3], address) > 0,
            "{address}, registered after the leader was lost, takes calls"
        );
    }
    for address in &old_addresses {
        assert_eq!(
            answered_by(&tallies[3], address),
            0,
            "{address}, stopped, is gone"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cluster_leader_killed_during_a_rolling_deploy_loses_no_call() {
    leader_lost_during_a_rolling_deploy(
        "etcd_cluster_leader_killed_during_a_rolling_deploy_loses_no_call",
        Backend::Etcd,
        Loss::Killed,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cluster_leader_partitioned_during_a_rolling_deploy_loses_no_call() {
    leader_lost_during_a_rolling_deploy(
        "etcd_cluster_leader_partitioned_during_a_rolling_deploy_loses_no_call",
        Backend::Etcd,
        Loss::Partitioned,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_ensemble_leader_killed_during_a_rolling_deploy_loses_no_call() {
    leader_lost_during_a_rolling_deploy(
        "zookeeper_ensemble_leader_killed_during_a_rolling_deploy_loses_no_call",
        Backend::ZooKeeper,
        Loss::Killed,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_ensemble_leader_partitioned_during_a_rolling_deploy_loses_no_call() {
    leader_lost_during_a_rolling_deploy(
        "zookeeper_ensemble_leader_partitioned_during_a_rolling_deploy_loses_no_call",
        Backend::ZooKeeper,
        Loss::Partitioned,
    )
    .await;
}
