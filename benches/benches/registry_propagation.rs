//! How long a registry takes to tell a subscriber that an instance left (and, for
//! reference, that one arrived): the window during which a consumer may still pick a
//! provider that is shutting down.
//!
//! For each backend, one provider client and one separate consumer client of a fresh
//! service; each round registers an instance, waits until the consumer sees it, then
//! unregisters it and measures until the consumer's snapshot no longer lists it. For Nacos
//! an untimed random pause of 0..500 ms precedes each change (see `pause`).
//! 200 rounds per backend (`RPC_BENCH_ROUNDS` to change), p50/p99/max from an HDR
//! histogram, printed as a table. The servers come from `RPC_TEST_ETCD_URL`,
//! `RPC_TEST_ZOOKEEPER_URL` and `RPC_TEST_NACOS_URL` (`eval "$(scripts/registries.sh
//! start)"`); a backend whose variable is missing is skipped, saying so. The in-process
//! hub is measured too, as the floor.
//!
//! Target: p99 under 50 ms for etcd and ZooKeeper on loopback. Nacos is bounded by the
//! server's push batching (rnacos: about 500 ms) and only recorded.
//!
//! Run: `cargo bench -p rpc-benches --bench registry_propagation`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hdrhistogram::Histogram;
use rpc_core::{Instance, Registry, ServiceKey, Subscription};

/// Bound on one propagation; a round that exceeds it aborts the backend's measurement.
const ROUND_BOUND: Duration = Duration::from_secs(10);

/// The p99 target for etcd and ZooKeeper on loopback.
const TARGET_P99: Duration = Duration::from_millis(50);

struct Backend {
    name: &'static str,
    env: Option<&'static str>,
    /// Query parameters added to the server URL.
    params: &'static str,
    target: bool,
    /// Random untimed pause before each change (see [`pause`]); zero for servers that
    /// push at once.
    jitter: Duration,
}

const BACKENDS: [Backend; 4] = [
    Backend {
        name: "memory",
        env: None,
        params: "",
        target: false,
        jitter: Duration::ZERO,
    },
    Backend {
        name: "etcd",
        env: Some("RPC_TEST_ETCD_URL"),
        params: "prefix=/rpc-bench",
        target: true,
        jitter: Duration::ZERO,
    },
    Backend {
        name: "zookeeper",
        env: Some("RPC_TEST_ZOOKEEPER_URL"),
        params: "root=/rpc-bench",
        target: true,
        jitter: Duration::ZERO,
    },
    Backend {
        name: "nacos",
        env: Some("RPC_TEST_NACOS_URL"),
        params: "group=rpc-bench",
        target: false,
        jitter: Duration::from_millis(500),
    },
];

/// What one backend measured.
struct Measured {
    unregister: Histogram<u64>,
    register: Histogram<u64>,
}

fn main() {
    let rounds = rpc_benches::env_u64("RPC_BENCH_ROUNDS", 200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    for backend in &BACKENDS {
        let url = match backend.env {
            None => format!("memory://bench-{:08x}", fastrand::u32(..)),
            Some(var) => match std::env::var(var) {
                Ok(url) if !url.trim().is_empty() => with_params(url.trim(), backend.params),
                _ => {
                    println!(
                        "{}: skipped, {var} is not set (start the servers with `eval \"$(scripts/registries.sh start)\"`)",
                        backend.name
                    );
                    continue;
                }
            },
        };
        eprintln!("{}: measuring {rounds} rounds ...", backend.name);
        match runtime.block_on(measure(&url, rounds, backend.jitter)) {
            Ok(measured) => rows.push((backend, measured)),
            Err(error) => println!("{}: failed: {error}", backend.name),
        }
    }
    print_table(rounds, &rows);
}

fn with_params(url: &str, params: &str) -> String {
    match (params.is_empty(), url.contains('?')) {
        (true, _) => url.to_owned(),
        (false, true) => format!("{url}&{params}"),
        (false, false) => format!("{url}?{params}"),
    }
}

async fn measure(url: &str, rounds: u64, jitter: Duration) -> Result<Measured, String> {
    let provider = rpc_registry::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let consumer = rpc_registry::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let service = ServiceKey::new(format!("bench.Propagation{:08x}", fastrand::u32(..)));
    let mut subscription = consumer
        .subscribe(&service)
        .await
        .map_err(|e| e.to_string())?;
    wait_until(&mut subscription, |count| count == 0).await?;
    let mut measured = Measured {
        unregister: rpc_testkit::measure::latency_histogram(),
        register: rpc_testkit::measure::latency_histogram(),
    };
    let result = rounds_loop(
        &provider,
        &mut subscription,
        &service,
        rounds,
        jitter,
        &mut measured,
    )
    .await;
    let _ = provider.close().await;
    let _ = consumer.close().await;
    result.map(|()| measured)
}

async fn rounds_loop(
    provider: &Arc<dyn Registry>,
    subscription: &mut Subscription,
    service: &ServiceKey,
    rounds: u64,
    jitter: Duration,
    measured: &mut Measured,
) -> Result<(), String> {
    for round in 0..rounds {
        let instance = Instance::new(service.clone(), "127.0.0.1", 30000 + (round % 1000) as u16);
        pause(jitter).await;
        let started = Instant::now();
        provider
            .register(&instance)
            .await
            .map_err(|e| e.to_string())?;
        wait_until(subscription, |count| count == 1).await?;
        record(&mut measured.register, started.elapsed());

        pause(jitter).await;
        let started = Instant::now();
        provider
            .unregister(&instance)
            .await
            .map_err(|e| e.to_string())?;
        wait_until(subscription, |count| count == 0).await?;
        record(&mut measured.unregister, started.elapsed());
    }
    Ok(())
}

/// An untimed random pause of up to `jitter`, so that changes do not lock into phase with
/// a server's periodic timer: rnacos checks its delayed pushes every 500 ms, and without
/// the pause every round would measure the same point of that cycle (always ~1 s).
async fn pause(jitter: Duration) {
    if !jitter.is_zero() {
        let millis = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..millis))).await;
    }
}

fn record(histogram: &mut Histogram<u64>, elapsed: Duration) {
    let micros = u64::try_from(elapsed.as_micros())
        .unwrap_or(u64::MAX)
        .max(1);
    histogram.saturating_record(micros);
}

/// Reads snapshots until one has an instance count `done` accepts (bounded).
async fn wait_until(
    subscription: &mut Subscription,
    done: impl Fn(usize) -> bool,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + ROUND_BOUND;
    loop {
        match tokio::time::timeout_at(deadline, subscription.next()).await {
            Ok(Some(snapshot)) if done(snapshot.instances.len()) => return Ok(()),
            Ok(Some(_)) => {}
            Ok(None) => return Err("the subscription ended".into()),
            Err(_) => return Err(format!("no expected snapshot within {ROUND_BOUND:?}")),
        }
    }
}

fn ms(micros: u64) -> String {
    format!("{:.3} ms", micros as f64 / 1000.0)
}

fn print_table(rounds: u64, rows: &[(&Backend, Measured)]) {
    println!();
    println!(
        "registry propagation, {rounds} rounds per backend (unregister/register -> subscriber sees it)"
    );
    println!();
    println!(
        "| backend | unregister p50 | unregister p99 | unregister max | register p50 | register p99 | p99 target (< 50 ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (backend, measured) in rows {
        let unregister = &measured.unregister;
        let target = if backend.target {
            let p99 = Duration::from_micros(unregister.value_at_quantile(0.99));
            if p99 < TARGET_P99 { "met" } else { "MISSED" }
        } else {
            "-"
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            backend.name,
            ms(unregister.value_at_quantile(0.50)),
            ms(unregister.value_at_quantile(0.99)),
            ms(unregister.max()),
            ms(measured.register.value_at_quantile(0.50)),
            ms(measured.register.value_at_quantile(0.99)),
            target
        );
    }
}
