//! One run: the hosts set up in turmoil, the schedule's events carried out at their
//! simulated times, the ledger handed to the invariants at the end.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::hosts::{self, Command, ConfigChange, World};
use crate::invariants::{self, Violation};
use crate::ledger::Entries;
use crate::schedule::{
    CONSUMERS, Event, Kind, Lost, PROVIDERS, Schedule, Target, consumer_host, provider_host,
};

/// How long a killed process's registrations outlive it (its lease's TTL).
pub const LEASE_TTL: Duration = Duration::from_secs(1);
/// How long the run goes on after its end, for the consumers to record their
/// directories.
const RECORD_WAIT: Duration = Duration::from_millis(100);
/// Longest time a message takes between two hosts.
const MAX_MESSAGE_LATENCY: Duration = Duration::from_millis(2);
/// Simulated time per step of the simulation.
const TICK: Duration = Duration::from_millis(1);

/// What one run came to.
#[derive(Debug)]
pub struct RunOutcome {
    /// The schedule run.
    pub schedule: Schedule,
    /// What the ledger held at the end.
    pub entries: Entries,
    /// What the invariants found.
    pub violations: Vec<Violation>,
}

/// Configuration changed on top of the hosts' own, to put a defect back (the
/// simulator's own tests turn stall detection off) or to try a setting under every
/// schedule.
#[derive(Clone, Default)]
pub struct Overrides {
    /// Applied to every provider's configuration.
    pub provider: Option<ConfigChange>,
    /// Applied to every consumer's configuration.
    pub consumer: Option<ConfigChange>,
}

/// Runs `schedule` and checks the invariants.
///
/// # Errors
/// turmoil's, when a host's software panicked.
pub fn run(schedule: Schedule, overrides: &Overrides) -> Result<RunOutcome, String> {
    let mut watch_delays = HashMap::new();
    let hosts: Vec<String> = (0..PROVIDERS)
        .map(provider_host)
        .chain((0..CONSUMERS).map(consumer_host))
        .collect();
    for (host, delay) in hosts.iter().zip(&schedule.watch_delays) {
        watch_delays.insert(host.clone(), *delay);
    }
    let mut world = World::new(
        watch_delays,
        CONSUMERS,
        schedule.calls_end(),
        schedule.end(),
    );
    world.load_balance = schedule.load_balance;
    world.provider_change.clone_from(&overrides.provider);
    world.consumer_change.clone_from(&overrides.consumer);
    let world = Arc::new(world);
    // The balancers' draws on this thread (every host runs on it) follow the seed.
    rpc::cluster::seed_this_thread(schedule.seed);
    let mut sim = turmoil::Builder::new()
        .simulation_duration(schedule.end() + Duration::from_secs(10))
        .tick_duration(TICK)
        // A data centre's network: each message takes 0-2 ms (turmoil's default, up to
        // 100 ms each way, is a WAN's, and puts every latency estimate far above
        // what an echo costs).
        .min_message_latency(Duration::ZERO)
        .max_message_latency(MAX_MESSAGE_LATENCY)
        .rng_seed(schedule.seed)
        .build();
    for index in 0..PROVIDERS {
        let world = world.clone();
        sim.host(provider_host(index), move || {
            let world = world.clone();
            async move {
                let host = provider_host(index);
                let ip = turmoil::lookup(host.as_str()).to_string();
                hosts::provider(world, host, ip).await;
                Ok(())
            }
        });
    }
    for index in 0..CONSUMERS {
        let world = world.clone();
        sim.host(consumer_host(index), move || {
            let world = world.clone();
            async move {
                hosts::consumer(world, index, consumer_host(index)).await;
                Ok(())
            }
        });
    }
    let mut driver = Driver {
        world: world.clone(),
        pending: actions(&schedule.events),
    };
    while sim.elapsed() < schedule.end() + RECORD_WAIT {
        driver.act(&mut sim);
        sim.step().map_err(|error| error.to_string())?;
    }
    let mut entries = world.ledger.entries();
    entries.arrivals = world.registry.arrivals();
    let providers: Vec<String> = (0..PROVIDERS)
        .map(|index| format!("{}:{}", sim.lookup(provider_host(index)), hosts::PORT))
        .collect();
    let violations = invariants::check(&schedule, &entries, &providers);
    Ok(RunOutcome {
        schedule,
        entries,
        violations,
    })
}

/// One step of an event, due at a simulated time.
#[derive(Clone, Copy, Debug)]
enum Action {
    Begin(Event),
    End(Event),
    /// A killed process's lease expires.
    Expire(Target),
}

fn actions(events: &[Event]) -> Vec<(Duration, Action)> {
    let mut actions = Vec::new();
    for event in events {
        actions.push((event.at, Action::Begin(*event)));
        actions.push((event.end(), Action::End(*event)));
        if event.kind == Kind::Kill {
            actions.push((event.at + LEASE_TTL, Action::Expire(event.target)));
        }
    }
    actions.sort_by_key(|(at, _)| *at);
    actions
}

/// Carries out the actions as their times come.
struct Driver {
    world: Arc<World>,
    pending: Vec<(Duration, Action)>,
}

impl Driver {
    fn act(&mut self, sim: &mut turmoil::Sim<'_>) {
        let now = sim.elapsed();
        let mut postponed = Vec::new();
        while let Some((at, action)) = self.pending.first().copied() {
            if at > now {
                break;
            }
            self.pending.remove(0);
            if !self.carry_out(sim, action) {
                postponed.push((now + TICK * 10, action));
            }
        }
        if !postponed.is_empty() {
            self.pending.extend(postponed);
            self.pending.sort_by_key(|(at, _)| *at);
        }
    }

    /// Carries out `action`; false when it must wait (a restart whose stop has not
    /// finished yet).
    fn carry_out(&self, sim: &mut turmoil::Sim<'_>, action: Action) -> bool {
        match action {
            Action::Begin(event) => self.begin(sim, &event),
            Action::End(event) => return self.end(sim, &event),
            Action::Expire(target) => self.world.registry.expire(&target.host()),
        }
        true
    }

    fn begin(&self, sim: &mut turmoil::Sim<'_>, event: &Event) {
        let host = event.target.host();
        match event.kind {
            Kind::Restart => {
                self.world.command(&host, Command::Stop);
            }
            Kind::Kill | Kind::ConsumerKill => {
                sim.crash(host.as_str());
                self.world.registry.killed(&host);
            }
            Kind::Pause => {
                for consumer in (0..CONSUMERS).map(consumer_host) {
                    sim.hold(host.as_str(), consumer.as_str());
                }
            }
            Kind::Offline => {
                self.world.command(&host, Command::Offline);
            }
            Kind::RegistryOutage => self.world.registry.set_reachable(&host, false),
            Kind::Upgrade => {
                self.world.command(&host, Command::Upgrade);
            }
            Kind::LinkDelay { delay } => {
                for consumer in (0..CONSUMERS).map(consumer_host) {
                    sim.set_link_latency(host.as_str(), consumer.as_str(), delay);
                }
            }
            Kind::Partition { lost } => {
                for consumer in (0..CONSUMERS).map(consumer_host) {
                    for (from, to) in directions(&host, &consumer, lost) {
                        sim.partition_oneway(from, to);
                    }
                }
            }
            Kind::RegistryLeaderLoss => self.world.registry.set_leader(false),
        }
    }

    fn end(&self, sim: &mut turmoil::Sim<'_>, event: &Event) -> bool {
        let host = event.target.host();
        match event.kind {
            Kind::Restart => {
                if !self.world.ledger.stopped_since(&host, event.at) {
                    return false;
                }
                sim.bounce(host.as_str());
            }
            Kind::Kill | Kind::ConsumerKill => sim.bounce(host.as_str()),
            Kind::Pause => {
                for consumer in (0..CONSUMERS).map(consumer_host) {
                    sim.release(host.as_str(), consumer.as_str());
                }
            }
            Kind::Offline => {
                self.world.command(&host, Command::Online);
            }
            Kind::RegistryOutage => self.world.registry.set_reachable(&host, true),
            // It ends by itself: the old generation drains and ends.
            Kind::Upgrade => {}
            Kind::LinkDelay { .. } => {
                for consumer in (0..CONSUMERS).map(consumer_host) {
                    // Back to 0 to MAX_MESSAGE_LATENCY.
                    sim.set_link_latency(host.as_str(), consumer.as_str(), Duration::ZERO);
                    sim.set_link_max_message_latency(
                        host.as_str(),
                        consumer.as_str(),
                        MAX_MESSAGE_LATENCY,
                    );
                }
            }
            Kind::Partition { lost } => {
                for consumer in (0..CONSUMERS).map(consumer_host) {
                    for (from, to) in directions(&host, &consumer, lost) {
                        sim.repair_oneway(from, to);
                    }
                }
            }
            Kind::RegistryLeaderLoss => self.world.registry.set_leader(true),
        }
        true
    }
}

/// The directions (from, to) a partition between `provider` and `consumer` cuts.
fn directions<'a>(provider: &'a str, consumer: &'a str, lost: Lost) -> Vec<(&'a str, &'a str)> {
    match lost {
        Lost::FromProvider => vec![(provider, consumer)],
        Lost::ToProvider => vec![(consumer, provider)],
        Lost::Both => vec![(provider, consumer), (consumer, provider)],
    }
}
