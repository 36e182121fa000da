//! The etcd backend with several members in its URL, one of them down: every request goes
//! to a member that answers, so connecting, registering, reading and closing never fail
//! because of the member that is down (a balancer that kept giving that member its share
//! failed a quarter of the connects and a third of the registrations).
//!
//! Against the etcd of `RPC_TEST_ETCD_URL`, in a scope of its own, as the conformance
//! suite (SKIPPED without it unless `RPC_TEST_REQUIRE_REGISTRIES=1`); the member that is
//! down is a loopback port nobody listens on, listed first.

#[path = "registry_conformance/backends.rs"]
#[allow(dead_code)]
mod backends;

use std::time::Duration;

use backends::{Fixture, Kind, Presence};
use futures_util::StreamExt;
use rpc_core::Instance;

/// A loopback port nobody listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// `url` with `member` listed before its members.
fn with_member_first(url: &str, member: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    match rest.split_once('@') {
        Some((credentials, hosts)) => format!("{scheme}://{credentials}@{member},{hosts}"),
        None => format!("{scheme}://{member},{rest}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_is_down_fails_no_request() {
    let Some(fixture) = Fixture::new(Kind::Etcd, "members_down") else {
        return;
    };
    let url = with_member_first(
        &fixture.url(Presence::Long),
        &format!("127.0.0.1:{}", closed_port()),
    );
    let service = fixture.service("down");
    let mut failures = Vec::new();
    for round in 0..4_u16 {
        let client = match rpc_registry::connect(&url).await {
            Ok(client) => client,
            Err(error) => {
                failures.push(format!("connect {round}: {error}"));
                continue;
            }
        };
        let instances: Vec<Instance> = (0..10)
            .map(|n| Instance::new(service.clone(), "127.0.0.1", 20_000 + round * 100 + n))
            .collect();
        for instance in &instances {
            if let Err(error) = client.register(instance).await {
                failures.push(format!("register {round}: {error}"));
            }
        }
        match client.subscribe(&service).await {
            Ok(mut subscription) => {
                let first = tokio::time::timeout(Duration::from_secs(5), subscription.next())
                    .await
                    .ok()
                    .flatten();
                let seen = first.map_or(0, |snapshot| snapshot.instances.len());
                if seen != instances.len() {
                    failures.push(format!("subscribe {round}: saw {seen} instances"));
                }
            }
            Err(error) => failures.push(format!("subscribe {round}: {error}")),
        }
        for instance in &instances[..5] {
            if let Err(error) = client.unregister(instance).await {
                failures.push(format!("unregister {round}: {error}"));
            }
        }
        if let Err(error) = client.close().await {
            failures.push(format!("close {round}: {error}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let left = fixture.leftovers(std::slice::from_ref(&service)).await;
    assert!(left.is_empty(), "closing left {left:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_down_is_unreachable_and_refused() {
    let url = format!(
        "etcd://127.0.0.1:{},127.0.0.1:{}?connect_timeout=1s",
        closed_port(),
        closed_port()
    );
    let Err(error) = rpc_registry::connect(&url).await else {
        panic!("connected where nothing listens");
    };
    let message = error.to_string();
    assert!(message.contains("refused the connection"), "{message}");
}
