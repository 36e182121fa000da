//! Our reference against tonic's own balancer, over the same five providers.
//!
//! Five in-process providers serve the same echo service on loopback (plain tonic
//! servers, so both sides talk to identical providers). Two clients call them:
//! - rpc: a reference of an `Application` with the default stack (P2C over peak-EWMA,
//!   failover with replay, blacklist, timeouts, consumer filters, metrics and tracing
//!   on), its five instances given by a static registry;
//! - tonic: `Channel::balance_list` over the same five endpoints (tower's P2C over
//!   pending requests).
//!
//! They run alternately in this process, in back-to-back pairs (the order alternates),
//! at 16 and 64 concurrent calls (closed loop). Each side's median run is printed, and
//! the medians of the per-pair ratios (ours / tonic). The last line is
//! `balance: qps_ratio=X p99_ratio=Y` for 16 calls. Target (issue 20): qps_ratio ≥ 1.10
//! at 16 and 64 calls with p99_ratio < 1, and a real spread: each row also prints each
//! provider's share of each side's calls (by the address its echo reply names).
//!
//! Environment: `BALANCE_MILLIS` per run (default 1500), `BALANCE_ROUNDS` pairs per
//! concurrency (default 7); `BALANCE_PROFILE=rpc|tonic` runs one client alone for
//! `BALANCE_PROFILE_MILLIS` (default 3000) at `BALANCE_PROFILE_CALLS` (default 16) calls
//! for a profiler, printing its requests and CPU time per request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use rpc_benches::shares::ProviderShares;
use rpc_benches::stacks::{echo_calls_of, our_consumer_of, plain_server, request};
use rpc_benches::{Compared, compare, drive, env_u64, profile, trace_as_in_production};
use tonic::transport::{Channel, Endpoint};

const PROVIDERS: usize = 5;
const CONCURRENCY: [usize; 2] = [16, 64];

/// tonic's balancer over `addrs`.
fn tonic_balanced(addrs: &[SocketAddr]) -> EchoClient<Channel> {
    let endpoints = addrs.iter().map(|addr| {
        Endpoint::from_shared(format!("http://{addr}"))
            .expect("an http URL")
            .tcp_nodelay(true)
    });
    EchoClient::new(Channel::balance_list(endpoints))
}

#[tokio::main]
async fn main() {
    trace_as_in_production();
    let duration = Duration::from_millis(env_u64("BALANCE_MILLIS", 1_500));
    let rounds = env_u64("BALANCE_ROUNDS", 7) as usize;
    let mut addrs = Vec::new();
    for _ in 0..PROVIDERS {
        addrs.push(plain_server().await);
    }
    let tonic_client = tonic_balanced(&addrs);
    let (our_client, _app) = our_consumer_of(&addrs).await;
    // Each side counts which provider answered: the spread, printed per row.
    let our_shares = Arc::new(ProviderShares::new(&addrs));
    let tonic_shares = Arc::new(ProviderShares::new(&addrs));
    let ours = echo_calls_of(our_client, "rpc", request(), Some(our_shares.clone()));
    let tonic = echo_calls_of(tonic_client, "tonic", request(), Some(tonic_shares.clone()));
    if let Ok(client) = std::env::var("BALANCE_PROFILE") {
        let duration = Duration::from_millis(env_u64("BALANCE_PROFILE_MILLIS", 3_000));
        let calls = env_u64("BALANCE_PROFILE_CALLS", 16) as usize;
        match client.as_str() {
            "tonic" => profile(&client, tonic, calls, duration).await,
            _ => profile(&client, ours, calls, duration).await,
        }
        return;
    }
    // Warm both: connections to all five, allocator, latency estimates.
    drive(ours.clone(), 16, Duration::from_secs(1)).await;
    drive(tonic.clone(), 16, Duration::from_secs(1)).await;
    our_shares.take_percentages();
    tonic_shares.take_percentages();

    println!(
        "{:>14} {:>6} {:>10} {:>9} {:>9}",
        "client", "calls", "qps", "p50 µs", "p99 µs"
    );
    let mut at_16 = None;
    for concurrency in CONCURRENCY {
        let Compared {
            ours: o,
            baseline: t,
            ratios: (qps, p50, p99),
        } = compare(ours.clone(), tonic.clone(), concurrency, duration, rounds).await;
        for (name, run) in [("rpc (p2c)", &o), ("tonic balance", &t)] {
            println!(
                "{name:>14} {concurrency:>6} {:>10.0} {:>9} {:>9}",
                run.qps, run.p50_us, run.p99_us
            );
        }
        println!(
            "{:>14} {concurrency:>6} qps_ratio={qps:.3} p50_ratio={p50:.3} p99_ratio={p99:.3} (median of {rounds} pairs)",
            "rpc/tonic"
        );
        for (name, shares) in [("rpc (p2c)", &our_shares), ("tonic balance", &tonic_shares)] {
            println!(
                "{name:>14} {concurrency:>6} share per provider, % of its calls: {}",
                shares.take_percentages()
            );
        }
        if concurrency == 16 {
            at_16 = Some((qps, p99));
        }
    }
    if let Some((qps, p99)) = at_16 {
        println!("balance: qps_ratio={qps:.3} p99_ratio={p99:.3}");
    }
}
