//! Balance quality under steady load, on tokio's paused clock (issue 16, part 6).
//!
//! A consumer sends steady load for 60 simulated seconds to providers whose answer time
//! is a base latency (times a slowness factor), jittered ±40 %, one answer in 200 an
//! outlier 8× as slow, and growing 10 % per call in flight on the provider. Two loads:
//! *light* (1 000 calls/s of 0.3 ms: calls rarely overlap, so P2C compares latency
//! estimates alone — where one of two equal providers used to get 70–90 % for seconds)
//! and *busy* (2 000 calls/s of 2 ms: a few calls in flight each). Every call's
//! answer is fed back as the cluster does (latency estimate, end of the call in flight).
//! Over every 5 s window (sliding by 1 s) each of equal providers must get its share
//! within ±15 points (two providers) or ±8 points (five); a provider twice as slow
//! must get clearly less than an equal share from the balancers that weigh load.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use super::testing::list;
use super::{Candidates, LeastActive, LoadBalance, P2c, Random, RequestInfo, RoundRobin};
use crate::invoker::ActiveCall;

/// The offered load of one run.
#[derive(Clone, Copy, Debug)]
struct Load {
    name: &'static str,
    calls_per_ms: usize,
    base_us: f64,
}

const LIGHT: Load = Load {
    name: "light",
    calls_per_ms: 1,
    base_us: 300.0,
};
const BUSY: Load = Load {
    name: "busy",
    calls_per_ms: 2,
    base_us: 2_000.0,
};
const SECONDS: usize = 60;
const WINDOW: usize = 5;

/// Calls per provider in each simulated second.
async fn run(lb: &dyn LoadBalance, load: Load, slowness: &[f64], seed: u64) -> Vec<Vec<u64>> {
    let list = list(&vec![100; slowness.len()]);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut due: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut calls: Vec<Option<(usize, Instant, ActiveCall)>> = Vec::new();
    let mut per_second = vec![vec![0u64; slowness.len()]; SECONDS];
    let request = RequestInfo {
        path: "/q.S/M",
        hash_key: None,
    };
    for ms in 0..SECONDS * 1_000 {
        tokio::time::advance(Duration::from_millis(1)).await;
        let now = Instant::now();
        while let Some(Reverse((at, slot))) = due.peek().copied() {
            if at > now {
                break;
            }
            due.pop();
            if let Some((index, started, guard)) = calls[slot].take() {
                list.invokers()[index].observe_latency(at - started, at);
                drop(guard);
            }
        }
        for _ in 0..load.calls_per_ms {
            let candidates = Candidates::new(&list, &[], now, None);
            let index = lb
                .select(&candidates, &request, &mut rng)
                .expect("every provider is selectable");
            let invoker = &list.invokers()[index];
            let guard = invoker.start_call();
            let jitter = if rng.random_range(0..200) == 0 {
                8.0
            } else {
                rng.random_range(0.6..1.4)
            };
            let queueing = 1.0 + 0.1 * invoker.active() as f64;
            let micros = load.base_us * slowness[index] * jitter * queueing;
            calls.push(Some((index, now, guard)));
            due.push(Reverse((
                now + Duration::from_micros(micros as u64),
                calls.len() - 1,
            )));
            per_second[ms / 1_000][index] += 1;
        }
    }
    per_second
}

/// The share of each provider in each 5 s window, sliding by one second.
fn window_shares(per_second: &[Vec<u64>]) -> Vec<Vec<f64>> {
    per_second
        .windows(WINDOW)
        .map(|window| {
            let counts: Vec<u64> = (0..window[0].len())
                .map(|i| window.iter().map(|second| second[i]).sum())
                .collect();
            let total: u64 = counts.iter().sum();
            counts.iter().map(|&c| c as f64 / total as f64).collect()
        })
        .collect()
}

/// Equal providers each get `1/providers` ± `points` of every 5 s window.
async fn assert_spreads(name: &str, lb: &dyn LoadBalance, load: Load, providers: usize) {
    let points = if providers == 2 { 0.15 } else { 0.08 };
    let shares = window_shares(&run(lb, load, &vec![1.0; providers], 7).await);
    let fair = 1.0 / providers as f64;
    let worst = shares
        .iter()
        .flatten()
        .map(|share| (share - fair).abs())
        .fold(0.0, f64::max);
    eprintln!(
        "{name:<12} {:<5} {providers} equal: worst 5 s window {:+.1} points off {:.0} %",
        load.name,
        worst * 100.0,
        fair * 100.0
    );
    assert!(
        worst <= points,
        "{name}, {} load, {providers} equal providers: a 5 s window is {:.1} points off the \
         fair share {:.1} %: {shares:.3?}",
        load.name,
        worst * 100.0,
        fair * 100.0
    );
}

/// A provider twice as slow as its `providers - 1` peers gets under 0.8 of a fair share.
async fn assert_slow_gets_less(name: &str, lb: &dyn LoadBalance, load: Load, providers: usize) {
    let mut slowness = vec![1.0; providers];
    slowness[0] = 2.0;
    let per_second = run(lb, load, &slowness, 9).await;
    let total: u64 = per_second.iter().flatten().sum();
    let slow: u64 = per_second.iter().map(|second| second[0]).sum();
    let share = slow as f64 / total as f64;
    let fair = 1.0 / providers as f64;
    eprintln!(
        "{name:<12} {:<5} {providers} with one 2x slow: it got {:.1} % (fair {:.0} %)",
        load.name,
        share * 100.0,
        fair * 100.0
    );
    assert!(
        share < 0.8 * fair,
        "{name}, {} load: the provider twice as slow got {share:.3} of the calls (fair {fair:.3})",
        load.name
    );
}

#[tokio::test(start_paused = true)]
async fn p2c_spreads_over_equal_providers_and_less_to_a_slow_one() {
    for load in [LIGHT, BUSY] {
        assert_spreads("p2c", &P2c, load, 2).await;
        assert_spreads("p2c", &P2c, load, 5).await;
        assert_slow_gets_less("p2c", &P2c, load, 2).await;
        assert_slow_gets_less("p2c", &P2c, load, 5).await;
    }
}

#[tokio::test(start_paused = true)]
async fn least_active_spreads_over_equal_providers_and_less_to_a_slow_one() {
    for load in [LIGHT, BUSY] {
        assert_spreads("least_active", &LeastActive, load, 2).await;
        assert_spreads("least_active", &LeastActive, load, 5).await;
    }
    // Under light load calls rarely overlap: every count is 0 and least-active is a
    // random pick. Only calls in flight tell a slow provider apart.
    assert_slow_gets_less("least_active", &LeastActive, BUSY, 2).await;
    assert_slow_gets_less("least_active", &LeastActive, BUSY, 5).await;
}

#[tokio::test(start_paused = true)]
async fn random_and_round_robin_spread_over_equal_providers() {
    for load in [LIGHT, BUSY] {
        for providers in [2, 5] {
            assert_spreads("random", &Random, load, providers).await;
            assert_spreads("round_robin", &RoundRobin::default(), load, providers).await;
        }
    }
}
