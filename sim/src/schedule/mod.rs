//! A schedule: the operations and faults of one run, drawn from a seed. The same seed
//! gives the same schedule, and (turmoil running every host on one thread, the
//! framework's random draws seeded from it) the same run.
//!
//! To add an operation or a fault: a variant of [`Kind`], its draw (`draw.rs`, in a
//! stream of its own so that every seed's other events stay as they were), whether it
//! is a hard fault ([`Kind::is_hard`]: one that may fail calls in flight) or may take
//! its provider out of the picks ([`Kind::suspends`]), and its actions in `driver.rs`
//! (`Driver::begin` / `Driver::end`).

use std::fmt;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

mod draw;
mod fits;

use draw::{NETWORK_STREAM, UPGRADE_STREAM, draw_event, draw_network_fault, draw_upgrade};
pub use fits::MAX_HARD_FAULTS;
use fits::fits;

/// Providers in each run.
pub const PROVIDERS: usize = 3;
/// Consumers in each run.
pub const CONSUMERS: usize = 2;
/// When the first event may begin: every process has started by then.
pub const FIRST_EVENT: Duration = Duration::from_secs(1);
/// When the last event may begin.
pub const LAST_EVENT: Duration = Duration::from_secs(5);
/// Calls go on this long after the last event ended...
pub const CALLS_AFTER: Duration = Duration::from_secs(2);
/// ...and the run ends this long after the calls stop, when directories are compared.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What happens to a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A provider's graceful stop, then a new process once it has stopped (a roll).
    Restart,
    /// A provider's process killed (its sockets reset), a new one started after
    /// `lasts`; its registrations expire with their lease meanwhile.
    Kill,
    /// A provider's host paused: nothing it sends or is sent moves for `lasts` (a
    /// stopped process, a frozen VM).
    Pause,
    /// A provider taken out of traffic (`POST /offline`) and brought back.
    Offline,
    /// A host cut off from the registry for `lasts`.
    RegistryOutage,
    /// A consumer's process killed and started again after `lasts`.
    ConsumerKill,
    /// A provider's hot upgrade: its next generation starts on the same host, takes
    /// over its address and instance ids, and the old one drains and ends.
    Upgrade,
    /// Every message between a provider's host and the consumers takes `delay` (50–400
    /// ms each way, instead of 0–2 ms) for `lasts`: a congested or distant link.
    LinkDelay {
        /// Each message's latency meanwhile.
        delay: Duration,
    },
    /// Messages between a provider's host and the consumers are lost for `lasts`, one
    /// way or both. Segments lost on a connection are never sent again (turmoil's TCP
    /// does not retransmit): that direction of every connection open across it stays
    /// silent after it heals, as behind a middlebox that lost its state — a host gone
    /// without a reset, for those connections. New connections work once it heals.
    Partition {
        /// Which messages are lost.
        lost: Lost,
    },
    /// The registry has no leader for `lasts`: every host's writes fail and every
    /// watch is silent, then what changed meanwhile arrives (leases live on, as etcd
    /// extends them across an election).
    RegistryLeaderLoss,
}

/// Which messages a [`Kind::Partition`] loses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The provider's to the consumers (its answers): one way.
    FromProvider,
    /// The consumers' to the provider (their requests): one way.
    ToProvider,
    /// Both ways: a symmetric partition.
    Both,
}

impl Kind {
    /// Whether calls in flight at the fault may fail because of it.
    pub fn is_hard(self) -> bool {
        matches!(self, Self::Kill | Self::Pause | Self::Partition { .. })
    }

    /// Whether the consumers may take its provider out of their picks meanwhile: a
    /// hard fault, or a link so slow that calls look overdue (their blacklist holds at
    /// most half the instances out, so two such providers among three at once leave
    /// one of them picked on purpose).
    pub fn suspends(self) -> bool {
        self.is_hard() || matches!(self, Self::LinkDelay { .. })
    }
}

/// Which host an event happens to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Provider number `0`.
    Provider(usize),
    /// Consumer number `0`.
    Consumer(usize),
    /// The registry itself.
    Registry,
}

impl Target {
    /// Its simulated host's name.
    pub fn host(self) -> String {
        match self {
            Self::Provider(index) => provider_host(index),
            Self::Consumer(index) => consumer_host(index),
            Self::Registry => "registry".to_owned(),
        }
    }
}

/// The host name of provider `index`.
pub fn provider_host(index: usize) -> String {
    format!("provider-{index}")
}

/// The host name of consumer `index`.
pub fn consumer_host(index: usize) -> String {
    format!("consumer-{index}")
}

/// One event of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// When it begins.
    pub at: Duration,
    /// What it is.
    pub kind: Kind,
    /// Its host.
    pub target: Target,
    /// How long it lasts (for a restart: how long the host stays down at least).
    pub lasts: Duration,
}

impl Event {
    /// When it ends.
    pub fn end(&self) -> Duration {
        self.at + self.lasts
    }
}

/// The events of one run and the per-host settings drawn with them.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The seed everything was drawn from.
    pub seed: u64,
    /// The events, by start time.
    pub events: Vec<Event>,
    /// How late each host's watches see registry changes (providers, then consumers).
    pub watch_delays: Vec<Duration>,
    /// The consumers' load balance (`consumer.references.*.loadbalance`): the
    /// framework must keep its promises under each.
    pub load_balance: &'static str,
}

/// The load balances a schedule draws from.
pub const LOAD_BALANCES: [&str; 4] = ["p2c", "round_robin", "random", "least_active"];

impl Schedule {
    /// The schedule of `seed`: 2 to 6 events at random times, never more than all but
    /// one provider faulty at once (with none left, failing is the right answer, and
    /// checks nothing), none overlapping another on the same host.
    pub fn draw(seed: u64) -> Self {
        let mut schedule = Self::draw_without_upgrades(seed);
        // Upgrades from a stream of their own: the other events of a seed are those it
        // drew before upgrades were simulated.
        let mut upgrades = SmallRng::seed_from_u64(seed ^ UPGRADE_STREAM);
        for _ in 0..upgrades.random_range(1..=3) {
            let event = draw_upgrade(&mut upgrades);
            if fits(&schedule.events, &event) {
                schedule.events.push(event);
            }
        }
        // Network faults and registry leader losses from a third stream.
        let mut network = SmallRng::seed_from_u64(seed ^ NETWORK_STREAM);
        for _ in 0..network.random_range(0..=2) {
            let event = draw_network_fault(&mut network);
            if fits(&schedule.events, &event) {
                schedule.events.push(event);
            }
        }
        schedule.events.sort_by_key(|event| event.at);
        schedule
    }

    /// The schedule `seed` drew before upgrades were simulated: [`Schedule::draw`]'s
    /// without its upgrades (the seeds kept as regressions from then replay it).
    pub fn draw_without_upgrades(seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let watch_delays = (0..PROVIDERS + CONSUMERS)
            .map(|_| Duration::from_millis(rng.random_range(0..200)))
            .collect();
        let load_balance = LOAD_BALANCES[rng.random_range(0..LOAD_BALANCES.len())];
        let mut events: Vec<Event> = Vec::new();
        for _ in 0..rng.random_range(2..=6) {
            let event = draw_event(&mut rng);
            if fits(&events, &event) {
                events.push(event);
            }
        }
        events.sort_by_key(|event| event.at);
        Self {
            seed,
            events,
            watch_delays,
            load_balance,
        }
    }

    /// When the consumers stop making calls.
    pub fn calls_end(&self) -> Duration {
        let last = self
            .events
            .iter()
            .map(Event::end)
            .max()
            .unwrap_or(FIRST_EVENT);
        last + CALLS_AFTER
    }

    /// When the run ends.
    pub fn end(&self) -> Duration {
        self.calls_end() + SETTLE
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "schedule of seed {} (load balance {}):",
            self.seed, self.load_balance
        )?;
        for event in &self.events {
            writeln!(
                f,
                "  at {:>5} ms  {:<15} {:<11} for {} ms",
                event.at.as_millis(),
                format!("{:?}", event.kind),
                event.target.host(),
                event.lasts.as_millis()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drawn from streams of their own since.
    fn added_later(kind: Kind) -> bool {
        matches!(
            kind,
            Kind::Upgrade
                | Kind::LinkDelay { .. }
                | Kind::Partition { .. }
                | Kind::RegistryLeaderLoss
        )
    }

    /// A seed's other events are those it drew before upgrades and network faults
    /// were simulated; and enough seeds have each for 1 000 of them to search their
    /// interleavings.
    #[test]
    fn later_events_join_those_a_seed_drew_before() {
        let (mut upgrades, mut network) = (0, 0);
        for seed in 0..200 {
            let schedule = Schedule::draw(seed);
            let others: Vec<Event> = schedule
                .events
                .iter()
                .filter(|event| !added_later(event.kind))
                .copied()
                .collect();
            let before = Schedule::draw_without_upgrades(seed);
            assert_eq!(others, before.events, "seed {seed}");
            assert_eq!(schedule.watch_delays, before.watch_delays);
            let has = |wanted: fn(Kind) -> bool| {
                usize::from(schedule.events.iter().any(|event| wanted(event.kind)))
            };
            upgrades += has(|kind| kind == Kind::Upgrade);
            network += has(|kind| added_later(kind) && kind != Kind::Upgrade);
        }
        println!(
            "of 200 seeds, {upgrades} upgrade a provider, {network} have a network or registry fault"
        );
        assert!(upgrades >= 60, "{upgrades} of 200 seeds upgrade");
        assert!(network >= 60, "{network} of 200 seeds have a network fault");
    }
}
