//! Partitions between the registry and the programs that use it (issue 26, scenarios 3
//! and 5), in a lab of network namespaces (`rpc_testkit::netlab`) with a real registry
//! server on a host of its own (`RegistryServer::start_in`: etcd, ZooKeeper):
//!
//! - **A provider cut off from the registry, still reachable by consumers**: its lease
//!   or session expires and the registry removes it; the consumer drains it with no
//!   failed call; when the link returns, the provider registers again by itself (no
//!   restart) and takes calls again.
//! - **A consumer cut off from the registry**: it keeps serving from the last set it
//!   knew, with no failed call, while one provider stops and another starts; once the
//!   link returns it converges: the stopped one is dropped, the new one is used.
//!
//! The consumer sends 500 idempotent calls/s of 20 ms from its own host throughout
//! (`common::lab`), tallied by the phase of the script they were sent in.
//!
//! Nacos: `tests/lab_nacos.rs`, the same scenarios with every program a process of its
//! own (nacos-sdk keeps one set of connections per process).

mod common;

use std::time::Duration;

use common::lab::{
    Discovery, Provider, assert_drained_and_back, assert_served_on_and_converged, consumer_on,
    until_listed,
};
use rpc_testkit::netlab::{Fault, Lab};
use rpc_testkit::registry_server::{Backend, RegistryServer};
use rpc_tests::lab_load::{listed, print_tallies};
use tokio::time::{Instant, timeout};

/// How long each steady phase of the script lasts.
const STEADY: Duration = Duration::from_secs(2);
/// How long a consumer stays cut off from the registry: longer than the registry
/// clients' sessions and leases (2 s here), so that those expire.
const CONSUMER_CUT: Duration = Duration::from_secs(5);
/// Nothing in these tests may take longer.
const BOUND: Duration = Duration::from_secs(240);

/// The registry's URL for the programs of the lab: sessions and leases of 2 s, so that
/// a partition removes a provider within seconds.
fn url(server: &RegistryServer) -> String {
    match server.backend() {
        Backend::Etcd => format!("{}?ttl=2s", server.url()),
        Backend::ZooKeeper => format!("{}?session_timeout=2s", server.url()),
        Backend::Nacos => unreachable!("Nacos in the lab: tests/lab_nacos.rs"),
    }
}

/// The lab and its registry server on host 0, or `None` after one line saying why the
/// test is skipped.
async fn lab_with_registry(
    test: &str,
    hosts: usize,
    backend: Backend,
) -> Option<(Lab, RegistryServer)> {
    common::logs();
    let lab = Lab::for_test(test, hosts)?;
    let server = common::lab::registry_in(test, backend, lab.host(0)).await?;
    Some((lab, server))
}

/// Scenario 3: provider A (host 1) is cut off from the registry (host 0) while the
/// consumer (host 3) still reaches it; B (host 2) serves throughout.
async fn provider_cut_off_from_the_registry(test: &str, backend: Backend) {
    let Some((lab, server)) = lab_with_registry(test, 4, backend).await else {
        return;
    };
    let discovery = Discovery::Url(url(&server));
    let a = Provider::start(lab.host(1), discovery.clone()).await;
    let b = Provider::start(lab.host(2), discovery.clone()).await;
    let a_address = a.address.clone();
    let script = async {
        let (directory, phase, load) = consumer_on(lab.host(3), &discovery).await;
        until_listed(&directory, &[&a.address, &b.address]).await;
        tokio::time::sleep(STEADY).await;
        // 1: A's link to the registry is cut; the registry removes A once its lease or
        // session expires, and the consumer's directory follows.
        lab.host(1).apply(Fault::CutFrom(lab.host(0).address()));
        phase.send_replace(1);
        let removed = until_listed(&directory, &[&b.address]).await;
        // 2: A removed; the consumer must send it nothing new.
        phase.send_replace(2);
        tokio::time::sleep(STEADY).await;
        // 3: the link is back; A registers again by itself.
        lab.host(1).restore();
        phase.send_replace(3);
        let back = until_listed(&directory, &[&a.address, &b.address]).await;
        // 4: A listed again.
        phase.send_replace(4);
        tokio::time::sleep(STEADY).await;
        drop(phase);
        (removed, back, load.await)
    };
    let (removed, back, tallies) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    a.stop().await;
    b.stop().await;
    println!(
        "{test}: removed {removed:?} after the cut, listed again {back:?} after the link returned"
    );
    print_tallies(test, &tallies);
    assert_drained_and_back(test, &tallies, &a_address);
}

/// Scenario 5: the consumer (host 3) is cut off from the registry (host 0); meanwhile B
/// (host 2) stops and C (host 4) starts. A (host 1) serves throughout.
async fn consumer_cut_off_from_the_registry(test: &str, backend: Backend) {
    let Some((lab, server)) = lab_with_registry(test, 5, backend).await else {
        return;
    };
    let discovery = Discovery::Url(url(&server));
    let a = Provider::start(lab.host(1), discovery.clone()).await;
    let b = Provider::start(lab.host(2), discovery.clone()).await;
    let (a_address, b_address) = (a.address.clone(), b.address.clone());
    let script = async {
        let (directory, phase, load) = consumer_on(lab.host(3), &discovery).await;
        until_listed(&directory, &[&a.address, &b.address]).await;
        tokio::time::sleep(STEADY).await;
        // 1: the consumer hears nothing from the registry; B stops, C starts.
        lab.host(3).apply(Fault::CutFrom(lab.host(0).address()));
        phase.send_replace(1);
        let cut_at = Instant::now();
        b.stop().await;
        let c = Provider::start(lab.host(4), discovery.clone()).await;
        tokio::time::sleep_until(cut_at + CONSUMER_CUT).await;
        let known_in_the_cut = listed(&directory);
        // 2: the link is back; the consumer converges.
        lab.host(3).restore();
        phase.send_replace(2);
        let converged = until_listed(&directory, &[&a.address, &c.address]).await;
        // 3: converged.
        phase.send_replace(3);
        tokio::time::sleep(STEADY).await;
        drop(phase);
        (c, known_in_the_cut, converged, load.await)
    };
    let (c, known_in_the_cut, converged, tallies) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    let c_address = c.address.clone();
    a.stop().await;
    c.stop().await;
    println!(
        "{test}: listed at the end of the cut {known_in_the_cut:?}; converged {converged:?} after the link returned"
    );
    print_tallies(test, &tallies);
    assert_served_on_and_converged(
        test,
        &tallies,
        &known_in_the_cut,
        [&a_address, &b_address, &c_address],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_provider_cut_off_from_the_registry_is_drained_and_comes_back() {
    provider_cut_off_from_the_registry(
        "etcd_a_provider_cut_off_from_the_registry_is_drained_and_comes_back",
        Backend::Etcd,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_provider_cut_off_from_the_registry_is_drained_and_comes_back() {
    provider_cut_off_from_the_registry(
        "zookeeper_a_provider_cut_off_from_the_registry_is_drained_and_comes_back",
        Backend::ZooKeeper,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_consumer_cut_off_from_the_registry_serves_on_and_converges() {
    consumer_cut_off_from_the_registry(
        "etcd_a_consumer_cut_off_from_the_registry_serves_on_and_converges",
        Backend::Etcd,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_consumer_cut_off_from_the_registry_serves_on_and_converges() {
    consumer_cut_off_from_the_registry(
        "zookeeper_a_consumer_cut_off_from_the_registry_serves_on_and_converges",
        Backend::ZooKeeper,
    )
    .await;
}
