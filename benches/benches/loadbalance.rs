//! Cost of one pick, per load-balance algorithm, at 10, 100, 1 000 and 10 000
//! instances. Criterion measures each; a summary table (ns per pick) follows.
//! Targets: random and P2C under 200 ns per pick at 10 000 instances, round-robin and
//! least-active under 1 µs (issue 16).
//!
//! Each pick includes what the request path does around it: reading tokio's clock and
//! building the candidate view (no instance excluded, none ejected).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rpc_cluster::loadbalance::{Candidates, InvokerList, LoadBalance, LoadBalances, RequestInfo};
use rpc_cluster::{Directory, DirectoryConfig, LoadBalanceKind};
use rpc_core::{Instance, InstanceId, ServiceKey, Snapshot};
use rpc_transport::ChannelOptions;
use tokio::time::Instant;

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
const KINDS: [LoadBalanceKind; 5] = [
    LoadBalanceKind::Random,
    LoadBalanceKind::P2c,
    LoadBalanceKind::RoundRobin,
    LoadBalanceKind::LeastActive,
    LoadBalanceKind::ConsistentHash,
];

/// A directory list of `n` never-picked instances with varied weights.
fn list(n: usize) -> Arc<InvokerList> {
    let service = ServiceKey::new("bench.Service");
    let directory = Directory::new(
        service.clone(),
        DirectoryConfig::default(),
        ChannelOptions::default(),
    );
    let instances = (0..n)
        .map(|i| {
            let mut instance = Instance::new(
                service.clone(),
                format!("10.0.{}.{}", i / 250, i % 250),
                20_880,
            )
            .with_weight(50 + (i % 4) as u32 * 25);
            instance.id = InstanceId::new(format!("instance-{i:05}"));
            instance
        })
        .collect();
    directory.apply(Snapshot::new(service, 1, instances));
    directory.list()
}

fn pick(lb: &dyn LoadBalance, list: &InvokerList, rng: &mut SmallRng, key: &[u8]) -> Option<usize> {
    let candidates = Candidates::new(list, &[], Instant::now(), None);
    let request = RequestInfo {
        path: "/bench.Service/Call",
        hash_key: Some(key),
    };
    lb.select(&candidates, &request, rng)
}

/// The load balance `kind` names, as a reference builds it.
fn build(kind: &LoadBalanceKind) -> Arc<dyn LoadBalance> {
    LoadBalances::default()
        .build(kind)
        .expect("a built-in load balance")
}

fn main() {
    let lists: Vec<(usize, Arc<InvokerList>)> = SIZES.iter().map(|&n| (n, list(n))).collect();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    for kind in KINDS {
        let mut group = criterion.benchmark_group(format!("pick/{}", kind.name()));
        for (n, list) in &lists {
            let lb = build(&kind);
            let mut rng = SmallRng::seed_from_u64(7);
            group.bench_with_input(BenchmarkId::from_parameter(n), list, |b, list| {
                b.iter(|| black_box(pick(lb.as_ref(), list, &mut rng, b"user-42")))
            });
        }
        group.finish();
    }
    criterion.final_summary();

    // A compact table of the same measurement, for docs/benchmarks.md.
    println!(
        "\nns per pick      {:>8} {:>8} {:>8} {:>8}",
        SIZES[0], SIZES[1], SIZES[2], SIZES[3]
    );
    for kind in KINDS {
        let mut row = format!("{:<16}", kind.name());
        for (_, list) in &lists {
            let lb = build(&kind);
            let mut rng = SmallRng::seed_from_u64(9);
            let picks = 500_000;
            // Round-robin and least-active build their structure once per list version:
            // the first pick pays it, untimed, as criterion's warm-up does above.
            black_box(pick(lb.as_ref(), list, &mut rng, b"warm-up"));
            let started = std::time::Instant::now();
            for k in 0..picks {
                let key = (k as u64).to_le_bytes();
                black_box(pick(lb.as_ref(), list, &mut rng, &key));
            }
            let ns = started.elapsed().as_nanos() as f64 / picks as f64;
            row.push_str(&format!(" {ns:>8.0}"));
        }
        println!("{row}");
    }
}
