//! The fleet's roll, decided before any consumer runs: when each provider starts,
//! registers and goes through its graceful stop's observable steps, and the registry's
//! history that follows from it — every write, and every list the registry pushes.
//!
//! A provider's timeline does not depend on the consumers' calls (its drain waits for
//! calls that take at most [`MAX_WORK`]), so one plan serves every consumer, and the
//! consumers can be run one after another against it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rpc::core::{Instance, InstanceId, ServiceKey};

use super::FleetSpec;

/// The port every provider listens on.
pub const PORT: u16 = 20_880;
/// Longest a stand-in's handler works on one call.
pub const MAX_WORK: Duration = Duration::from_millis(20);
/// When the roll begins: every consumer has started and called for a while.
pub const ROLL_START: Duration = Duration::from_secs(2);
/// A new provider registers this long after it was started, at the most (start-up).
const START_SPREAD: Duration = Duration::from_secs(1);
/// The deploy controller stops the old providers of a batch within this of each other.
const SIGTERM_SPREAD: Duration = Duration::from_millis(200);
/// From SIGTERM to the unregistration's end (shutdown step 1), at the most.
const UNREGISTER_SPREAD: Duration = Duration::from_millis(20);
/// Shutdown step 2 ends between one offline window without a request and
/// `consumer_update_wait_time` (the framework's defaults): drawn per provider, since
/// it depends on the calls every consumer sends it.
const OFFLINE_WINDOW: Duration = Duration::from_millis(500);
const CONSUMER_UPDATE_WAIT: Duration = Duration::from_secs(3);

/// What one provider does, in time since the simulation's start.
#[derive(Clone, Debug)]
pub struct ProviderTimeline {
    /// Its registration.
    pub instance: Instance,
    /// When it listens (dials before fail: connection refused).
    pub listens: Duration,
    /// When its registration is written (zero for the old generation).
    pub registered: Duration,
    /// Its graceful stop, for the old generation.
    pub stop: Option<StopTimes>,
}

/// The observable steps of one provider's graceful stop.
#[derive(Clone, Copy, Debug)]
pub struct StopTimes {
    /// Its registration is withdrawn (step 1); from now on every response carries the
    /// closing mark.
    pub unregistered: Duration,
    /// New calls are refused "closing, not executed" (step 3).
    pub rejects: Duration,
    /// Every connection gets GOAWAY, the listener closes (step 6), the process exits.
    pub exits: Duration,
}

impl ProviderTimeline {
    /// Whether a dial at `at` finds it listening.
    pub fn listening(&self, at: Duration) -> bool {
        at >= self.listens && self.stop.is_none_or(|stop| at < stop.exits)
    }
}

/// One change of the registry's list.
#[derive(Clone, Copy, Debug)]
struct Change {
    at: Duration,
    provider: usize,
    registered: bool,
}

/// A list the registry pushes to every subscriber (each sees it its own delay later).
#[derive(Clone, Debug)]
pub struct Push {
    /// When the registry sends it.
    pub at: Duration,
    /// The registry's revision: how many writes it includes.
    pub revision: u64,
    /// The instances registered at `at`.
    pub instances: Arc<[Instance]>,
}

/// The whole roll.
#[derive(Debug)]
pub struct RollPlan {
    /// The service every provider serves.
    pub service: ServiceKey,
    /// The old generation (`0..instances`), then the new one.
    pub providers: Vec<ProviderTimeline>,
    by_authority: HashMap<String, usize>,
    /// Every list pushed, the first one (the old generation) at zero.
    pub pushes: Vec<Push>,
    /// Registrations and unregistrations during the roll.
    pub writes: u64,
    /// From the first new provider's start to the last old one's exit.
    pub roll: (Duration, Duration),
}

impl RollPlan {
    /// The roll `spec` asks for, drawn from its seed.
    pub fn draw(spec: &FleetSpec) -> Self {
        let mut rng = SmallRng::seed_from_u64(spec.seed);
        let service = ServiceKey::new("echo.Echo");
        let n = spec.instances;
        let mut providers: Vec<ProviderTimeline> = (0..2 * n)
            .map(|index| ProviderTimeline {
                instance: instance(&service, index),
                listens: Duration::ZERO,
                registered: Duration::ZERO,
                stop: None,
            })
            .collect();
        // Batch after batch: the new providers start; once the last of them registered,
        // the old ones they replace are stopped and the next batch starts.
        let mut batch_start = ROLL_START;
        for first in (0..n).step_by(spec.batch) {
            let batch = first..(first + spec.batch).min(n);
            for old in batch.clone() {
                let new = &mut providers[n + old];
                new.listens = batch_start + between(&mut rng, Duration::ZERO, START_SPREAD);
                new.registered = new.listens;
            }
            let ready = batch_start + START_SPREAD;
            for old in batch {
                let sigterm = ready + between(&mut rng, Duration::ZERO, SIGTERM_SPREAD);
                let unregistered = sigterm + between(&mut rng, Duration::ZERO, UNREGISTER_SPREAD);
                let rejects =
                    unregistered + between(&mut rng, OFFLINE_WINDOW, CONSUMER_UPDATE_WAIT);
                providers[old].stop = Some(StopTimes {
                    unregistered,
                    rejects,
                    exits: rejects + MAX_WORK,
                });
            }
            batch_start = ready;
        }
        let changes = changes(&providers, n);
        let pushes = pushes(&providers, n, &changes, spec.push_merge);
        let roll_end = providers[..n]
            .iter()
            .filter_map(|provider| provider.stop.map(|stop| stop.exits))
            .max()
            .unwrap_or(ROLL_START);
        let by_authority = providers
            .iter()
            .enumerate()
            .map(|(index, provider)| (provider.instance.authority(), index))
            .collect();
        Self {
            service,
            providers,
            by_authority,
            pushes,
            writes: changes.len() as u64,
            roll: (ROLL_START, roll_end),
        }
    }

    /// The provider at `authority`.
    pub fn provider(&self, authority: &str) -> Option<(usize, &ProviderTimeline)> {
        let index = *self.by_authority.get(authority)?;
        Some((index, &self.providers[index]))
    }

    /// The roll's length.
    pub fn roll_length(&self) -> Duration {
        self.roll.1 - self.roll.0
    }

    /// The authorities registered once the roll is over: the new generation's.
    pub fn final_authorities(&self) -> Vec<String> {
        let mut last: Vec<String> = self.pushes.last().map_or_else(Vec::new, |push| {
            push.instances.iter().map(Instance::authority).collect()
        });
        last.sort_unstable();
        last
    }
}

/// Provider number `index`, on a host of its own.
fn instance(service: &ServiceKey, index: usize) -> Instance {
    let host = format!(
        "10.{}.{}.{}",
        index / 62_500,
        index / 250 % 250,
        index % 250 + 1
    );
    let mut instance =
        Instance::new(service.clone(), host.clone(), PORT).with_metadata("application", "fleet");
    instance.id = InstanceId::new(format!("{host}:{PORT}-{index:08x}"));
    instance.start_time_ms = 0;
    instance
}

fn between(rng: &mut SmallRng, low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    low + Duration::from_micros(rng.random_range(0..(high - low).as_micros() as u64))
}

/// Every registry write of the roll, in time order.
fn changes(providers: &[ProviderTimeline], n: usize) -> Vec<Change> {
    let mut changes: Vec<Change> = providers
        .iter()
        .enumerate()
        .flat_map(|(provider, timeline)| {
            let registered = (provider >= n).then_some(Change {
                at: timeline.registered,
                provider,
                registered: true,
            });
            let unregistered = timeline.stop.map(|stop| Change {
                at: stop.unregistered,
                provider,
                registered: false,
            });
            registered.into_iter().chain(unregistered)
        })
        .collect();
    changes.sort_by_key(|change| (change.at, change.provider));
    changes
}

/// The lists the registry pushes: the old generation at zero, then, from each change
/// that finds no push pending, one push `merge` later with every change up to then (as
/// a registry that merges the pushes of one service over a short delay does).
fn pushes(
    providers: &[ProviderTimeline],
    n: usize,
    changes: &[Change],
    merge: Duration,
) -> Vec<Push> {
    let mut registered: Vec<bool> = (0..providers.len()).map(|index| index < n).collect();
    let list = |registered: &[bool]| -> Arc<[Instance]> {
        providers
            .iter()
            .zip(registered)
            .filter(|(_, registered)| **registered)
            .map(|(provider, _)| provider.instance.clone())
            .collect()
    };
    let mut pushes = vec![Push {
        at: Duration::ZERO,
        revision: 1,
        instances: list(&registered),
    }];
    let mut next = 0;
    while next < changes.len() {
        let at = changes[next].at + merge;
        while next < changes.len() && changes[next].at <= at {
            registered[changes[next].provider] = changes[next].registered;
            next += 1;
        }
        pushes.push(Push {
            at,
            revision: 1 + next as u64,
            instances: list(&registered),
        });
    }
    pushes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> FleetSpec {
        FleetSpec {
            instances: 200,
            consumers: 1,
            batch: 30,
            ..FleetSpec::full()
        }
    }

    #[test]
    fn every_old_provider_goes_through_the_steps_in_order_after_its_replacement_registered() {
        let spec = small();
        let plan = RollPlan::draw(&spec);
        let n = spec.instances;
        for (old, provider) in plan.providers[..n].iter().enumerate() {
            let stop = provider.stop.expect("every old provider stops");
            assert!(stop.unregistered < stop.rejects && stop.rejects < stop.exits);
            assert!(stop.rejects - stop.unregistered >= OFFLINE_WINDOW);
            assert!(plan.providers[n + old].registered < stop.unregistered);
        }
        assert!(plan.providers[n..].iter().all(|new| new.stop.is_none()));
        assert_eq!(plan.writes, 2 * n as u64);
    }

    #[test]
    fn the_registry_never_lists_fewer_than_the_fleet_and_ends_with_the_new_generation() {
        let spec = small();
        let plan = RollPlan::draw(&spec);
        assert!(
            plan.pushes
                .iter()
                .all(|push| push.instances.len() >= spec.instances)
        );
        let new: Vec<String> = {
            let mut new: Vec<String> = plan.providers[spec.instances..]
                .iter()
                .map(|provider| provider.instance.authority())
                .collect();
            new.sort_unstable();
            new
        };
        assert_eq!(plan.final_authorities(), new);
    }

    #[test]
    fn changes_within_the_merge_delay_make_one_push() {
        let spec = small();
        let plan = RollPlan::draw(&spec);
        // 400 writes; each push covers every write within its merge delay.
        assert!(plan.pushes.len() < 60, "{} pushes", plan.pushes.len());
        for pair in plan.pushes.windows(2) {
            assert!(pair[1].at > pair[0].at && pair[1].revision > pair[0].revision);
        }
        assert_eq!(plan.pushes.last().unwrap().revision, 1 + plan.writes);
    }

    #[test]
    fn a_dial_finds_a_provider_only_between_its_start_and_its_exit() {
        let plan = RollPlan::draw(&small());
        let old = &plan.providers[0];
        let stop = old.stop.unwrap();
        assert!(old.listening(stop.rejects));
        assert!(!old.listening(stop.exits));
        let new = &plan.providers[200];
        assert!(!new.listening(new.listens - Duration::from_millis(1)));
        assert!(new.listening(new.listens));
        let (index, _) = plan.provider(&new.instance.authority()).unwrap();
        assert_eq!(index, 200);
    }
}
