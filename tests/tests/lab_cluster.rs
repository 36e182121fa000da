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
//! And the same on a 3-member rnacos cluster (raft for its own state; each member
//! answers for the instances its clients registered and shares them with the others),
//! with every program a process of its own (`common::lab_process`: nacos-sdk keeps one
//! set of connections per process). There the registrations must outlive the loss for
//! as long as rnacos takes to declare a silent member invalid (15 s) and drop the
//! instances its clients held, and a check more.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::{Loss, Outcome, a_survivor_leads};
use common::lab::{Discovery, Provider, consumer_config, consumer_on, until_listed};
use common::lab_process::{ConsumerProcess, ProviderProcess, with_registry};
use rpc_testkit::netlab::Lab;
use rpc_testkit::registry_server::{Backend, RegistryServer};
use rpc_tests::lab_load::{RATE, listed};
use tokio::time::{Instant, timeout};

/// Lease time-to-live (etcd) and session timeout (ZooKeeper) of every program.
const LIVENESS: Duration = Duration::from_secs(9);
/// How long the registrations must outlive a lost rnacos member: its peers declare it
/// invalid after 15 s of silence (and drop its clients' instances then), checked every
/// 3 s.
const NACOS_QUIET: Duration = Duration::from_secs(20);
/// How long each steady phase of the script lasts.
const STEADY: Duration = Duration::from_secs(2);
/// Nothing in these tests may take longer.
const BOUND: Duration = Duration::from_secs(240);

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
        let lost = loss.inflict(&lab, &mut members).await;
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
        let survivor_leads = a_survivor_leads(&members, lost).await;
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
    loss.end(&lab, lost);
    let outcome = Outcome {
        lost: (lost, loss),
        survivor_leads,
        converged,
        tallies,
        old: old_addresses,
        new: new_addresses,
    };
    outcome.check(test);
}

/// As [`leader_lost_during_a_rolling_deploy`], on an rnacos cluster, with every program
/// a process.
async fn nacos_leader_lost_during_a_rolling_deploy(test: &str, loss: Loss) {
    common::logs();
    let Some(lab) = Lab::for_test(test, 6) else {
        return;
    };
    let hosts = [0, 1, 2].map(|index| lab.host(index).clone());
    let Some(mut members) = common::lab::registry_cluster_in(test, Backend::Nacos, &hosts).await
    else {
        return;
    };
    let url = RegistryServer::cluster_url(&members);
    let old = [
        ProviderProcess::start(lab.host(3), &url).await,
        ProviderProcess::start(lab.host(4), &url).await,
    ];
    let old_addresses: Vec<String> = old.iter().map(|p| p.address.clone()).collect();
    let config = with_registry(consumer_config(), &url);
    let mut consumer = ConsumerProcess::start(lab.host(5), &config, RATE).await;
    let script = async {
        consumer
            .until_listed(&[&old[0].address, &old[1].address])
            .await;
        tokio::time::sleep(STEADY).await;
        // 1: the leader is lost; the registrations must outlive it.
        let lost = loss.inflict(&lab, &mut members).await;
        consumer.phase(1).await;
        let before: BTreeSet<String> = old_addresses.iter().cloned().collect();
        let quiet_until = Instant::now() + NACOS_QUIET;
        while Instant::now() < quiet_until {
            assert_eq!(
                consumer.listed(),
                before,
                "the registrations outlive the leader"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let survivor_leads = a_survivor_leads(&members, lost).await;
        // 2: the rolling deploy, through the surviving members.
        consumer.phase(2).await;
        // Each old provider is taken offline first and must leave the directory while
        // it still runs: an unregistration through a client that failed over away from
        // the lost member must hold (the connection it left would write it again).
        let mut new = Vec::new();
        let mut serving = old_addresses.clone();
        for (provider, host) in old.into_iter().zip([3, 4]) {
            new.push(ProviderProcess::start(lab.host(host), &url).await);
            provider.offline().await;
            serving.retain(|address| *address != provider.address);
            serving.push(new[new.len() - 1].address.clone());
            let expected: Vec<&str> = serving.iter().map(String::as_str).collect();
            consumer.until_listed(&expected).await;
            let report = provider.stop().await;
            assert!(
                report.contains("clean"),
                "the old provider stops clean: {report}"
            );
        }
        let converged = consumer
            .until_listed(&[&new[0].address, &new[1].address])
            .await;
        // 3: the new providers serve.
        consumer.phase(3).await;
        tokio::time::sleep(STEADY).await;
        (lost, survivor_leads, converged, new)
    };
    let (lost, survivor_leads, converged, new) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    let tallies = consumer.end().await;
    let new_addresses: Vec<String> = new.iter().map(|p| p.address.clone()).collect();
    for provider in new {
        provider.stop().await;
    }
    loss.end(&lab, lost);
    let outcome = Outcome {
        lost: (lost, loss),
        survivor_leads,
        converged,
        tallies,
        old: old_addresses,
        new: new_addresses,
    };
    outcome.check(test);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_cluster_leader_killed_during_a_rolling_deploy_loses_no_call() {
    nacos_leader_lost_during_a_rolling_deploy(
        "nacos_cluster_leader_killed_during_a_rolling_deploy_loses_no_call",
        Loss::Killed,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_cluster_leader_partitioned_during_a_rolling_deploy_loses_no_call() {
    nacos_leader_lost_during_a_rolling_deploy(
        "nacos_cluster_leader_partitioned_during_a_rolling_deploy_loses_no_call",
        Loss::Partitioned,
    )
    .await;
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
