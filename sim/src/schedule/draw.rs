//! Drawing a schedule's events from a seed: the events of the first stream (rolls,
//! kills, pauses, offlines, registry outages, consumer restarts), and the streams of
//! their own that upgrades and network faults come from, so that adding those left
//! every seed's other events as they were.

use std::time::Duration;

use rand::RngExt;
use rand::rngs::SmallRng;

use super::{CONSUMERS, Event, FIRST_EVENT, Kind, LAST_EVENT, Lost, PROVIDERS, Target};

/// A duration of `range` milliseconds.
fn millis(rng: &mut SmallRng, range: std::ops::Range<u64>) -> Duration {
    Duration::from_millis(rng.random_range(range))
}

/// When an event begins: between [`FIRST_EVENT`] and [`LAST_EVENT`].
fn start(rng: &mut SmallRng) -> Duration {
    millis(
        rng,
        FIRST_EVENT.as_millis() as u64..LAST_EVENT.as_millis() as u64,
    )
}

pub(super) fn draw_event(rng: &mut SmallRng) -> Event {
    let at = start(rng);
    let provider = Target::Provider(rng.random_range(0..PROVIDERS));
    let (kind, target, lasts) = match rng.random_range(0..100) {
        0..25 => (Kind::Restart, provider, millis(rng, 100..1_000)),
        25..45 => (Kind::Kill, provider, millis(rng, 300..1_500)),
        45..65 => (Kind::Pause, provider, millis(rng, 1_000..2_500)),
        65..80 => (Kind::Offline, provider, millis(rng, 300..1_500)),
        80..90 => {
            let target = if rng.random_bool(0.5) {
                provider
            } else {
                Target::Consumer(rng.random_range(0..CONSUMERS))
            };
            (Kind::RegistryOutage, target, millis(rng, 300..2_000))
        }
        _ => {
            let consumer = Target::Consumer(rng.random_range(0..CONSUMERS));
            (Kind::ConsumerKill, consumer, millis(rng, 100..1_000))
        }
    };
    Event {
        at,
        kind,
        target,
        lasts,
    }
}

/// Mixed into the seed for the stream upgrades are drawn from.
pub(super) const UPGRADE_STREAM: u64 = 0x7570_6772_6164_6573;

/// Mixed into the seed for the stream network faults are drawn from.
pub(super) const NETWORK_STREAM: u64 = 0x6e65_7477_6f72_6b73;

/// A link delay, a partition or a registry leader loss at a random time.
pub(super) fn draw_network_fault(rng: &mut SmallRng) -> Event {
    let at = start(rng);
    let provider = Target::Provider(rng.random_range(0..PROVIDERS));
    let (kind, target, lasts) = match rng.random_range(0..3) {
        0 => {
            let delay = millis(rng, 50..400);
            (
                Kind::LinkDelay { delay },
                provider,
                millis(rng, 1_000..3_000),
            )
        }
        1 => {
            let lost = [Lost::FromProvider, Lost::ToProvider, Lost::Both][rng.random_range(0..3)];
            let kind = Kind::Partition { lost };
            (kind, provider, millis(rng, 500..2_000))
        }
        _ => (
            Kind::RegistryLeaderLoss,
            Target::Registry,
            millis(rng, 300..2_000),
        ),
    };
    Event {
        at,
        kind,
        target,
        lasts,
    }
}

/// A hot upgrade of a random provider at a random time.
pub(super) fn draw_upgrade(rng: &mut SmallRng) -> Event {
    Event {
        at: start(rng),
        kind: Kind::Upgrade,
        target: Target::Provider(rng.random_range(0..PROVIDERS)),
        // Nothing ends it (the old generation drains by itself): the time over which a
        // run's description counts the calls made during it.
        lasts: Duration::from_secs(1),
    }
}
