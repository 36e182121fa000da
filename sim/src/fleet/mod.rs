//! Fleet scale: a rolling deploy of thousands of providers behind a thousand consumers.
//!
//! One process cannot hold a thousand consumers' directories of ten thousand instances
//! each (1.3 KB per instance each, ~13 GB), so the fleet is simulated consumer by
//! consumer: the roll is decided first (`plan.rs`: every provider's timeline and the
//! registry's pushes), then each consumer — the framework's real `Application` — runs
//! through it on a paused clock of its own (`consumer.rs`), against stand-in providers
//! (`standin.rs`) and the registry's pushes (`registry.rs`). A provider's timeline does
//! not depend on who calls it, so each consumer sees the same fleet it would see beside
//! the others; what the others would add is load on the registry, which is counted from
//! the plan. Consumers run on as many threads as the machine has cores.

pub mod consumer;
pub mod plan;
pub mod registry;
pub mod standin;
pub mod tally;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rpc::cluster::{Directory, DirectoryConfig};
use rpc::core::Snapshot;
use rpc::transport::ChannelOptions;

use self::consumer::ConsumerOutcome;
use self::plan::RollPlan;
use self::tally::TallySummary;

/// The fleet to simulate.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// Providers, replaced one batch after another by as many new ones.
    pub instances: usize,
    /// Consumers, each calling through the whole roll.
    pub consumers: usize,
    /// Providers replaced at once (the deploy's surge).
    pub batch: usize,
    /// Everything random is drawn from it.
    pub seed: u64,
    /// How long the registry merges changes into one push.
    pub push_merge: Duration,
    /// How often each consumer calls.
    pub call_interval: Duration,
    /// Threads running consumers.
    pub threads: usize,
}

impl FleetSpec {
    /// 10 000 providers rolled in batches of 500 behind 1 000 consumers calling every
    /// 40 ms, pushes merged over 500 ms.
    pub fn full() -> Self {
        Self {
            instances: 10_000,
            consumers: 1_000,
            batch: 500,
            seed: 0,
            push_merge: Duration::from_millis(500),
            call_interval: Duration::from_millis(40),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// What a fleet run came to.
#[derive(Debug, Default)]
pub struct FleetReport {
    /// Every consumer's calls and what the stand-ins did with them.
    pub tally: TallySummary,
    /// Consumers whose directory did not end with exactly the new generation, with
    /// what it held too much and what it missed.
    pub unconverged: Vec<(usize, Vec<String>, Vec<String>)>,
    /// Consumers that did not start, with why.
    pub start_failures: Vec<(usize, String)>,
    /// From the first new provider's start to the last old one's exit (simulated).
    pub roll: Duration,
    /// Registry writes (registrations and unregistrations) during the roll.
    pub registry_writes: u64,
    /// Pushes delivered to consumers during the roll, all consumers together.
    pub watch_events: u64,
    /// Pushes each consumer received during the roll.
    pub pushes: u64,
    /// What applying each push cost a directory, in microseconds (wall clock): mean
    /// and largest.
    pub update_us: (f64, f64),
    /// The run's wall-clock time.
    pub wall: Duration,
}

impl FleetReport {
    /// Whether an invariant broke: a call failed or ran twice, a directory did not
    /// converge, a consumer did not start.
    pub fn violated(&self) -> bool {
        !self.tally.failed.is_empty()
            || self.tally.executed_twice > 0
            || !self.unconverged.is_empty()
            || !self.start_failures.is_empty()
    }
}

/// Runs the fleet `spec` describes.
pub fn run(spec: &FleetSpec) -> FleetReport {
    let started = Instant::now();
    let plan = Arc::new(RollPlan::draw(spec));
    let deliveries = Arc::new(AtomicU64::new(0));
    let next = AtomicUsize::new(0);
    let report = Mutex::new(FleetReport::default());
    std::thread::scope(|scope| {
        for _ in 0..spec.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= spec.consumers {
                        break;
                    }
                    let outcome = consumer::run(&plan, spec, index, &deliveries, None);
                    add(&mut report.lock(), index, outcome);
                }
            });
        }
    });
    let mut report = report.into_inner();
    report.roll = plan.roll_length();
    report.registry_writes = plan.writes;
    report.watch_events = deliveries.load(Ordering::Relaxed);
    report.pushes = plan.pushes.len() as u64 - 1;
    report.update_us = update_cost(&plan);
    report.wall = started.elapsed();
    report
}

fn add(report: &mut FleetReport, index: usize, outcome: ConsumerOutcome) {
    report.tally.add(outcome.tally);
    if let Some((extra, missing)) = outcome.unconverged {
        report.unconverged.push((index, extra, missing));
    }
    if let Some(error) = outcome.start_failed {
        report.start_failures.push((index, error));
    }
}

/// Applies every push of the roll to a directory of the framework's, in order, timing
/// each: what one registry event costs a consumer of this fleet (mean, largest).
fn update_cost(plan: &RollPlan) -> (f64, f64) {
    let directory = Directory::new(
        plan.service.clone(),
        DirectoryConfig::default(),
        ChannelOptions::default(),
    );
    let mut timings = Vec::with_capacity(plan.pushes.len());
    for push in &plan.pushes {
        let snapshot = Snapshot::new(plan.service.clone(), push.revision, Vec::new());
        let snapshot = Snapshot {
            instances: push.instances.clone(),
            ..snapshot
        };
        let clock = Instant::now();
        directory.apply(snapshot);
        timings.push(clock.elapsed().as_secs_f64() * 1e6);
    }
    // The first push fills an empty directory: not an event of the roll.
    let events = &timings[1.min(timings.len())..];
    let mean = events.iter().sum::<f64>() / events.len().max(1) as f64;
    let largest = events.iter().copied().fold(0.0, f64::max);
    (mean, largest)
}
