//! A rolling deploy across hosts with delay on every link, on etcd (issue 26, scenario
//! 1), in a lab of network namespaces (`rpc_testkit::netlab`):
//!
//! - etcd on host 0; three echo providers on hosts 1 to 3; the relays on host 4; the
//!   consumer on host 5, sending 2 000 idempotent calls/s of 20 ms;
//! - every link a program uses passes a relay that delays each byte by 1 ms each way
//!   (`netlab::Relay`: these kernels have no `netem`): each provider registers its
//!   relay's address (`protocol.advertise_host`), so consumers dial through it, and
//!   every program reaches etcd through a relay of etcd;
//! - each provider is replaced in turn (the new one started, then the old one stopped
//!   gracefully): no call may fail.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::lab::{Discovery, Provider, assert_none_failed, consumer_on_at, until_listed};
use rpc_testkit::netlab::{Host, Lab, Relay};
use rpc_testkit::registry_server::Backend;
use rpc_tests::lab_load::print_tallies;
use tokio::time::timeout;

/// The delay of each link, each way.
const DELAY: Duration = Duration::from_millis(1);
/// Calls a second of the load.
const RATE: u32 = 2_000;
/// How long the load runs before the first restart and after the last.
const STEADY: Duration = Duration::from_secs(2);
/// Nothing in this test may take longer.
const BOUND: Duration = Duration::from_secs(180);
/// The lab's hosts, by role.
const ETCD: usize = 0;
const PROVIDERS: [usize; 3] = [1, 2, 3];
const RELAYS: usize = 4;
const CONSUMER: usize = 5;

/// A provider on `host` serving on `port`, behind a relay of its own on the relays'
/// host (same port), which it registers as its address.
struct Relayed {
    provider: Provider,
    relay: Relay,
}

impl Relayed {
    async fn start(lab: &Lab, host: usize, port: u16, discovery: &Discovery) -> Self {
        let host: &Host = lab.host(host);
        let target = SocketAddr::from((host.address(), port));
        let relay = Relay::start(lab.host(RELAYS), port, target, DELAY)
            .await
            .expect("the relay binds");
        let advertised = relay.ip().to_string();
        let provider = Provider::start_with(host, discovery.clone(), move |config| {
            config.protocol.port = port;
            config.protocol.advertise_host = Some(advertised);
        })
        .await;
        Self { provider, relay }
    }

    /// Stops the provider gracefully, then its relay.
    async fn stop(self) {
        self.provider.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_across_delayed_links_on_etcd_loses_no_call() {
    let test = "a_rolling_deploy_across_delayed_links_on_etcd_loses_no_call";
    common::logs();
    let Some(lab) = Lab::for_test(test, 6) else {
        return;
    };
    let Some(etcd) = common::lab::registry_in(test, Backend::Etcd, lab.host(ETCD)).await else {
        return;
    };
    let etcd_target = SocketAddr::from((lab.host(ETCD).address(), 2379));
    let etcd_relay = Relay::start(lab.host(RELAYS), 2379, etcd_target, DELAY)
        .await
        .expect("etcd's relay binds");
    let discovery = Discovery::Url(format!("etcd://{}?ttl=5s", etcd_relay.address()));
    assert!(etcd.url().contains(&lab.host(ETCD).address().to_string()));

    let mut ports = 31_000..;
    let mut running = Vec::new();
    for host in PROVIDERS {
        let port = ports.next().expect("ports");
        running.push(Relayed::start(&lab, host, port, &discovery).await);
    }
    let script = async {
        let (directory, phase, load) = consumer_on_at(lab.host(CONSUMER), &discovery, RATE).await;
        // The directory lists the providers by the relays' addresses they registered.
        let registered: Vec<String> = running
            .iter()
            .map(|r| r.relay.address().to_string())
            .collect();
        let registered: Vec<&str> = registered.iter().map(String::as_str).collect();
        until_listed(&directory, &registered).await;
        tokio::time::sleep(STEADY).await;
        phase.send_replace(1);
        let mut restarted = Vec::new();
        for (slot, host) in running.iter_mut().zip(PROVIDERS) {
            let port = ports.next().expect("ports");
            let new = Relayed::start(&lab, host, port, &discovery).await;
            let old = std::mem::replace(slot, new);
            restarted.push(old.provider.address.clone());
            old.stop().await;
        }
        phase.send_replace(2);
        tokio::time::sleep(STEADY).await;
        drop(phase);
        (restarted, load.await)
    };
    let (restarted, tallies) = timeout(BOUND, script)
        .await
        .expect("the run ends within its bound");
    let new: Vec<String> = running.iter().map(|r| r.provider.address.clone()).collect();
    for relayed in running {
        relayed.stop().await;
    }
    print_tallies(test, &tallies);
    let sent: usize = tallies
        .iter()
        .map(|t| t.answered.values().sum::<usize>() + t.failed.len())
        .sum();
    println!("{test}: {sent} calls, {} restarts", restarted.len());
    assert_none_failed(test, &tallies);
    assert_eq!(tallies.len(), 3, "every phase sent calls");
    for address in &restarted {
        assert!(
            tallies[0].answered.contains_key(address),
            "{address} served before its restart"
        );
    }
    for address in &new {
        assert!(
            tallies[2].answered.contains_key(address),
            "{address} serves after the deploy"
        );
    }
}

/// The relay hands every byte on in order, and no earlier than its delay each way: a
/// round trip through it takes at least twice the delay (a lower bound, which the
/// relay's `sleep_until` guarantees whatever the machine's load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_delays_each_way_and_keeps_the_order() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let test = "a_relay_delays_each_way_and_keeps_the_order";
    let Some(lab) = Lab::for_test(test, 2) else {
        return;
    };
    let delay = Duration::from_millis(50);
    let echo_at = SocketAddr::from((lab.host(1).address(), 7));
    let (listening, listened) = tokio::sync::oneshot::channel();
    let echo = lab.host(1).run(move || async move {
        let listener = tokio::net::TcpListener::bind(echo_at).await.expect("bind");
        let _ = listening.send(());
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut buffer = [0u8; 1024];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => stream.write_all(&buffer[..read]).await.expect("echo"),
            }
        }
    });
    listened.await.expect("the echo server listens");
    let relay = Relay::start(lab.host(0), 7000, echo_at, delay)
        .await
        .expect("the relay binds");
    let through = relay.address();
    let (sent, round_trip) = timeout(
        BOUND,
        lab.host(0).run(move || async move {
            let mut stream = tokio::net::TcpStream::connect(through).await.expect("dial");
            let started = tokio::time::Instant::now();
            let mut received = Vec::new();
            for message in [&b"one "[..], b"two ", b"three"] {
                stream.write_all(message).await.expect("send");
            }
            while received.len() < b"one two three".len() {
                let mut buffer = [0u8; 64];
                let read = stream.read(&mut buffer).await.expect("receive");
                assert!(read > 0, "the relay closed early");
                received.extend_from_slice(&buffer[..read]);
            }
            (received, started.elapsed())
        }),
    )
    .await
    .expect("the round trip ends within its bound");
    drop(relay);
    let _ = timeout(BOUND, echo).await;
    println!("{test}: round trip {round_trip:?} through a relay of {delay:?} each way");
    assert_eq!(sent, b"one two three");
    assert!(round_trip >= 2 * delay, "{round_trip:?}");
}
