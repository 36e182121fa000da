//! Choosing the instance of an attempt: the directory's current list, less what the
//! blacklist makes unavailable (ejected, closing, being probed) and what this call
//! already tried, then the load balance's choice — or, when nothing is selectable,
//! panic mode: the instance whose ejection or closing ends soonest, rather than failing
//! every call while every instance looks bad; and when the list has none either, an
//! instance the registry removed last, while it still serves (the directory's last
//! resort: a provider being restarted serves until it refuses).

use std::sync::Arc;

use tokio::time::Instant;

use super::Call;
use crate::directory::Directory;
use crate::health::Availability;
use crate::invoker::Invoker;
use crate::loadbalance::{Candidates, InvokerList, RequestInfo};

/// How the instance of one attempt is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The load balance's choice among the selectable instances not tried yet; in panic
    /// mode the one back soonest.
    Balanced,
    /// The first selectable instance not tried yet, in the directory's order.
    InOrder,
}

impl Call {
    /// Picks the instance of the next attempt by `route`.
    pub(super) fn pick(&mut self, route: Route) -> Option<Arc<Invoker>> {
        self.pick_live(Directory::current, route, route == Route::Balanced)
    }

    /// Up to `forks` different instances for attempts sent at once; each is marked
    /// tried. Only the first may be a panic-mode pick: the extra forks must not go to an
    /// ejected or closing instance.
    pub(super) fn pick_forks(&mut self, forks: usize) -> Vec<Arc<Invoker>> {
        let mut invokers = Vec::with_capacity(forks);
        while invokers.len() < forks {
            let panic = invokers.is_empty();
            let Some(invoker) = self.pick_live(Directory::current, Route::Balanced, panic) else {
                break;
            };
            self.tried.push(invoker.id().clone());
            invokers.push(invoker);
        }
        invokers
    }

    /// Every selectable instance, in the directory's order (for broadcast).
    pub(super) fn pick_all(&self) -> Vec<Arc<Invoker>> {
        let list = self.stack.directory.current();
        let candidates = Candidates::new(&list, &[], Instant::now(), None);
        candidates
            .selectable()
            .map(|i| candidates.get(i).clone())
            .collect()
    }

    /// Picks from the list `current` reads from the directory (borrowed, so a pick
    /// writes no shared reference count). An instance removed by a registry update after
    /// the list was loaded is passed over and the pick made again from a fresh list, so a
    /// call never goes to an instance that already left.
    fn pick_live<L: std::ops::Deref<Target = InvokerList>>(
        &mut self,
        current: impl Fn(&Directory) -> L,
        route: Route,
        panic: bool,
    ) -> Option<Arc<Invoker>> {
        loop {
            let list = current(&self.stack.directory);
            let Some(invoker) = self.pick_from(&list, route, panic) else {
                return panic.then(|| self.last_resort()).flatten();
            };
            if !invoker.is_removed() {
                return Some(invoker);
            }
            self.tried.push(invoker.id().clone());
        }
    }

    /// A removed instance the directory keeps because none was left, not tried yet.
    fn last_resort(&self) -> Option<Arc<Invoker>> {
        let invoker = self.stack.directory.last_resort(&self.tried)?;
        self.stack.blacklist.stats().note_panic_pick();
        Some(invoker)
    }

    fn pick_from(&mut self, list: &InvokerList, route: Route, panic: bool) -> Option<Arc<Invoker>> {
        let candidates =
            Candidates::new(list, &self.tried, Instant::now(), self.stack.config.warmup);
        let index = match route {
            Route::InOrder => candidates.selectable().next(),
            Route::Balanced => {
                let request = RequestInfo {
                    path: self.parts.uri.path(),
                    hash_key: self.hash_key.as_deref(),
                };
                self.stack
                    .load_balance
                    .select(&candidates, &request, &mut self.rng)
            }
        };
        let index = index.or_else(|| panic.then(|| self.panic_pick(&candidates)).flatten())?;
        Some(candidates.get(index).clone())
    }

    /// The instance whose ejection or closing ends soonest, among those not tried yet.
    fn panic_pick(&self, candidates: &Candidates<'_>) -> Option<usize> {
        let now = candidates.now();
        let index = (0..candidates.len())
            .filter(|&i| {
                let invoker = candidates.get(i);
                invoker.weight() > 0 && !invoker.is_removed() && !self.tried.contains(invoker.id())
            })
            .min_by_key(|&i| match candidates.get(i).availability(now) {
                Availability::Unavailable { until } => until,
                _ => now,
            })?;
        self.stack.blacklist.stats().note_panic_pick();
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use rpc_core::{InstanceId, ServiceKey, Snapshot};

    use super::super::testing::{call, channel, instance};
    use super::*;
    use crate::config::{BlacklistConfig, ReferenceConfig};

    #[tokio::test(start_paused = true)]
    async fn a_pick_whose_instance_was_removed_meanwhile_is_made_again() {
        let channel = channel(
            &[1, 2],
            ReferenceConfig::default(),
            BlacklistConfig::default(),
            3,
        );
        let directory = channel.directory().clone();
        let stale = directory.list();
        // Make instance 2 look slow, so P2C on the stale list chooses instance 1 ...
        stale.invokers()[1].observe_latency(Duration::from_secs(1), Instant::now());
        // ... which the registry removes before the call is sent.
        directory.apply(Snapshot::new(ServiceKey::new("t.S"), 2, vec![instance(2)]));
        let mut call = call(&channel);
        let loads = std::sync::atomic::AtomicUsize::new(0);
        let picked = call
            .pick_live(
                |_| {
                    if loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                        stale.clone()
                    } else {
                        directory.list()
                    }
                },
                Route::Balanced,
                true,
            )
            .unwrap();
        assert_eq!(picked.id().as_str(), "i2");
        assert_eq!(
            call.tried.as_slice(),
            [InstanceId::new("i1")],
            "the removed choice was passed over"
        );
        assert_eq!(
            loads.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "a fresh list was loaded"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn all_ejected_instances_take_panic_picks_and_recover_within_one_ejection_time() {
        let blacklist = BlacklistConfig {
            max_ejection_percent: 100,
            jitter: 0.0,
            ..BlacklistConfig::default()
        };
        let channel = channel(&[1, 2, 3], ReferenceConfig::default(), blacklist, 3);
        let list = channel.directory().list();
        let stack = channel.stack().clone();
        let mut rng = SmallRng::seed_from_u64(3);
        for invoker in list.invokers() {
            for _ in 0..5 {
                stack
                    .blacklist
                    .on_failure(invoker, list.invokers(), Instant::now(), &mut rng);
            }
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        let now = Instant::now();
        assert!(
            list.invokers().iter().all(|i| i.health().ejected(now)),
            "all ejected"
        );
        // Panic mode: the call still goes somewhere — the instance back soonest.
        let picked = call(&channel).pick(Route::Balanced).unwrap();
        assert_eq!(picked.id().as_str(), "i1");
        assert_eq!(channel.stats().blacklist.panic_picks, 1);

        // The instances heal; one ejection time later each is probed once and restored.
        // Calls arrive; no time passes beyond the one ejection time.
        tokio::time::advance(Duration::from_secs(30)).await;
        for _ in 0..50 {
            let invoker = call(&channel).pick(Route::Balanced).unwrap();
            let now = Instant::now();
            if invoker.availability(now) == Availability::Probe {
                assert!(invoker.health().begin_probe(now));
            }
            stack.blacklist.on_success(&invoker, now);
        }
        let now = Instant::now();
        assert!(
            list.invokers()
                .iter()
                .all(|i| i.availability(now) == Availability::Ready)
        );
        assert_eq!(channel.stats().blacklist.recoveries, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn in_order_picks_the_first_selectable_untried_instance_and_never_panics() {
        let channel = channel(
            &[1, 2, 3],
            ReferenceConfig::default(),
            BlacklistConfig::default(),
            3,
        );
        let mut call = call(&channel);
        let first = call.pick(Route::InOrder).unwrap();
        assert_eq!(first.id().as_str(), "i1");
        call.tried.push(first.id().clone());
        assert_eq!(call.pick(Route::InOrder).unwrap().id().as_str(), "i2");
        for invoker in channel.directory().list().invokers() {
            call.tried.push(invoker.id().clone());
        }
        assert!(call.pick(Route::InOrder).is_none());
        assert_eq!(channel.stats().blacklist.panic_picks, 0);
    }
}
