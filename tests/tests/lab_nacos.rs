//! Scenarios 3 and 5 of issue 26 on Nacos (rnacos on a host of its own), in a lab of
//! network namespaces (`rpc_testkit::netlab`), with every program a process of its own
//! inside its host (`common::lab_process`): nacos-sdk keeps every connection of a
//! process on one runtime (`nacos_sdk::common::executor`), so as threads of the test all
//! programs would reach Nacos from one host and a cut between another host and the
//! registry would not be one (`tests/lab_registry.rs` runs the same scenarios on etcd
//! and ZooKeeper with in-process programs).
//!
//! - **A provider cut off from the registry, still reachable by consumers**: Nacos
//!   holds a provider's instances by its gRPC connection, and removes them once the
//!   connection stays silent past the server's detection timeout and an unanswered
//!   probe (rnacos: `RNACOS_GRPC_DETECTION_TIMEOUT_SECOND`, 15 s by default, 2 s here,
//!   then 3 s for the probe's answer); the consumer drains the provider with no failed
//!   call; when the link returns, nacos-sdk reconnects (after its back-off) and our
//!   registry client registers the instance again, with no restart.
//! - **A consumer cut off from the registry** serves on from the set it knew while one
//!   provider stops and another starts, and converges once the link returns.
//!
//! The consumer process sends 500 idempotent calls/s of 20 ms throughout.

mod common;

use std::time::Duration;

use common::lab::{
    assert_drained_and_back, assert_served_on_and_converged, consumer_config, registry_in_with,
};
use common::lab_process::{ConsumerProcess, ProviderProcess, with_registry};
use rpc_testkit::netlab::{Fault, Lab};
use rpc_testkit::registry_server::{Backend, RegistryServer};
use rpc_tests::lab_load::{RATE, print_tallies};
use tokio::time::{Instant, timeout};

/// How long each steady phase of the script lasts.
const STEADY: Duration = Duration::from_secs(2);
/// How long a consumer stays cut off from the registry: longer than the server's
/// detection of a silent client (2 s + 3 s for its probe).
const CONSUMER_CUT: Duration = Duration::from_secs(7);
/// Nothing in these tests may take longer.
const BOUND: Duration = Duration::from_secs(300);

/// The lab and rnacos on its host 0, detecting a silent client after 2 s (the lease of
/// the etcd runs), or `None` after one line saying why the test is skipped.
async fn lab_with_nacos(test: &str, hosts: usize) -> Option<(Lab, RegistryServer)> {
    common::logs();
    let lab = Lab::for_test(test, hosts)?;
    let env = [("RNACOS_GRPC_DETECTION_TIMEOUT_SECOND", "2")];
    let server = registry_in_with(test, Backend::Nacos, lab.host(0), &env).await?;
    Some((lab, server))
}

/// A lab of `hosts` hosts with rnacos on host 0 (see [`lab_with_nacos`]), providers A
/// and B on hosts 1 and 2, and the consumer on host 3 sending its load; or `None` after
/// one line saying why the test is skipped.
async fn two_providers_and_a_consumer(
    test: &str,
    hosts: usize,
) -> Option<(Lab, RegistryServer, [ProviderProcess; 2], ConsumerProcess)> {
    let (lab, server) = lab_with_nacos(test, hosts).await?;
    let url = server.url();
    let a = ProviderProcess::start(lab.host(1), &url).await;
    let b = ProviderProcess::start(lab.host(2), &url).await;
    let config = with_registry(consumer_config(), &url);
    let consumer = ConsumerProcess::start(lab.host(3), &config, RATE).await;
    Some((lab, server, [a, b], consumer))
}

/// Scenario 3: provider A (host 1) is cut off from Nacos (host 0) while the consumer
/// (host 3) still reaches it; B (host 2) serves throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_a_provider_cut_off_from_the_registry_is_drained_and_comes_back() {
    let test = "nacos_a_provider_cut_off_from_the_registry_is_drained_and_comes_back";
    let Some((lab, _server, [a, b], mut consumer)) = two_providers_and_a_consumer(test, 4).await
    else {
        return;
    };
    let script = async {
        consumer.until_listed(&[&a.address, &b.address]).await;
        tokio::time::sleep(STEADY).await;
        // 1: A's link to the registry is cut; Nacos removes A once it finds the
        // connection dead, and the consumer's directory follows.
        lab.host(1).apply(Fault::CutFrom(lab.host(0).address()));
        consumer.phase(1).await;
        let removed = consumer.until_listed(&[&b.address]).await;
        // 2: A removed; the consumer must send it nothing new.
        consumer.phase(2).await;
        tokio::time::sleep(STEADY).await;
        // 3: the link is back; A registers again by itself.
        lab.host(1).restore();
        consumer.phase(3).await;
        let back = consumer.until_listed(&[&a.address, &b.address]).await;
        // 4: A listed again.
        consumer.phase(4).await;
        tokio::time::sleep(STEADY).await;
        (removed, back)
    };
    let (removed, back) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    let tallies = consumer.end().await;
    let a_address = a.address.clone();
    let stopped = [a.stop().await, b.stop().await];
    println!(
        "{test}: removed {removed:?} after the cut, listed again {back:?} after the link returned"
    );
    print_tallies(test, &tallies);
    assert_drained_and_back(test, &tallies, &a_address);
    for report in stopped {
        assert!(
            report.contains("clean"),
            "each provider stops clean: {report}"
        );
    }
}

/// Scenario 5: the consumer (host 3) is cut off from Nacos (host 0); meanwhile B (host
/// 2) stops and C (host 4) starts. A (host 1) serves throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_a_consumer_cut_off_from_the_registry_serves_on_and_converges() {
    let test = "nacos_a_consumer_cut_off_from_the_registry_serves_on_and_converges";
    let Some((lab, server, [a, b], mut consumer)) = two_providers_and_a_consumer(test, 5).await
    else {
        return;
    };
    let url = server.url();
    let (a_address, b_address) = (a.address.clone(), b.address.clone());
    let script = async {
        consumer.until_listed(&[&a.address, &b.address]).await;
        tokio::time::sleep(STEADY).await;
        // 1: the consumer hears nothing from the registry; B stops, C starts.
        lab.host(3).apply(Fault::CutFrom(lab.host(0).address()));
        consumer.phase(1).await;
        let cut_at = Instant::now();
        let b_stopped = b.stop().await;
        let c = ProviderProcess::start(lab.host(4), &url).await;
        tokio::time::sleep_until(cut_at + CONSUMER_CUT).await;
        let known_in_the_cut = consumer.listed();
        // 2: the link is back; the consumer converges.
        lab.host(3).restore();
        consumer.phase(2).await;
        let converged = consumer.until_listed(&[&a.address, &c.address]).await;
        // 3: converged.
        consumer.phase(3).await;
        tokio::time::sleep(STEADY).await;
        (b_stopped, c, known_in_the_cut, converged)
    };
    let (b_stopped, c, known_in_the_cut, converged) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    let tallies = consumer.end().await;
    let c_address = c.address.clone();
    let stopped = [b_stopped, a.stop().await, c.stop().await];
    println!(
        "{test}: listed at the end of the cut {known_in_the_cut:?}; converged {converged:?} after the link returned"
    );
    print_tallies(test, &tallies);
    let addresses = [a_address.as_str(), &b_address, &c_address];
    assert_served_on_and_converged(test, &tallies, &known_in_the_cut, addresses);
    for report in stopped {
        assert!(
            report.contains("clean"),
            "each provider stops clean: {report}"
        );
    }
}
