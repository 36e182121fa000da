//! Load balancing: pick one instance among the selectable ones.
//!
//! A [`LoadBalance`] sees a [`Candidates`] view of the directory's current list: the
//! invokers, their weights (with warm-up applied) and which of them may be picked now
//! (not ejected, not closing, not already tried in this call). Algorithms that can pick
//! in O(1) or O(log n) — random, P2C, consistent hash — test only the instances they
//! draw, so a pick among 10 000 instances costs about as much as among 10. Round-robin
//! and least-active keep structures that spare them the scan their definitions
//! suggest: a lazily-scored heap per weight (`rr_schedule.rs`) and a segment tree of
//! calls in flight that invokers keep up to date (`crate::active_index`).
//!
//! A reference names its load balance; [`LoadBalances`] turns the name into one, for
//! the built-in ones and for an application's own (`by_name.rs`).
//!
//! The RNG is passed in — the call's own generator (rand's `SmallRng`), which a channel
//! built `with_seed` derives from its seed — so tests run with a seed.

mod by_name;
mod consistent_hash;
mod least_active;
mod p2c;
mod random;
mod round_robin;
mod rr_schedule;
mod warmup;

#[cfg(test)]
mod balance_quality;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::RngExt;
use rand::rngs::SmallRng;
use rpc_core::InstanceId;
use tokio::time::Instant;

pub use by_name::{LoadBalanceFactory, LoadBalances, UnknownLoadBalance};
pub use consistent_hash::ConsistentHash;
pub use least_active::LeastActive;
pub use p2c::P2c;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use warmup::warmed_weight;

use crate::active_index::ActiveIndex;
use crate::health::Availability;
use crate::invoker::Invoker;

/// Random draws a pick makes before it falls back to a scan of the selectable
/// instances (random, P2C, least-active): with at least one selectable instance in
/// two, eight misses in a row happen once in 256 picks, and the scan is still exact.
pub(crate) const DRAWS: usize = 8;

/// Picks one instance for one request.
pub trait LoadBalance: Send + Sync + std::fmt::Debug + 'static {
    /// The index (into `candidates`) of the instance to call, or `None` when no
    /// candidate is selectable. Must only return selectable indices and never panic.
    /// Every random draw comes from `rng`, the call's generator (rand 0.10's
    /// `SmallRng`), so a channel built with a seed picks reproducibly.
    fn select(
        &self,
        candidates: &Candidates<'_>,
        request: &RequestInfo<'_>,
        rng: &mut SmallRng,
    ) -> Option<usize>;

    /// Whether it reads [`RequestInfo::hash_key`] (the configured `hash_key` header);
    /// calls of other load balances do not look the header up. Default: false.
    fn reads_hash_key(&self) -> bool {
        false
    }
}

/// What a load balance may know of the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestInfo<'a> {
    /// The gRPC path, `/package.Service/Method`.
    pub path: &'a str,
    /// The value of the configured hash-key header, if the request has it.
    pub hash_key: Option<&'a [u8]>,
}

/// The directory's list at one version: invokers sorted by id, with prefix sums of
/// their registered weights for O(log n) weighted draws.
#[derive(Debug, Default)]
pub struct InvokerList {
    version: u64,
    invokers: Vec<Arc<Invoker>>,
    cumulative: Vec<u64>,
    uniform: bool,
    /// Calls in flight per instance, built by the first least-active pick.
    active: OnceLock<Arc<ActiveIndex>>,
}

impl InvokerList {
    /// A list of `invokers` (sorted here by id; one already in that order, as the
    /// directory passes it, costs one pass) at `version`.
    pub fn new(version: u64, mut invokers: Vec<Arc<Invoker>>) -> Self {
        invokers.sort_unstable_by(|a, b| a.id().cmp(b.id()));
        let mut total = 0u64;
        let cumulative = invokers
            .iter()
            .map(|invoker| {
                total += u64::from(invoker.weight());
                total
            })
            .collect();
        let uniform = invokers.windows(2).all(|w| w[0].weight() == w[1].weight());
        Self {
            version,
            invokers,
            cumulative,
            uniform,
            active: OnceLock::new(),
        }
    }

    /// The index of calls in flight over this list, built (and every invoker told to
    /// report to it) on first use.
    pub(crate) fn active_index(&self) -> &Arc<ActiveIndex> {
        self.active.get_or_init(|| {
            let weights = self.invokers.iter().map(|i| i.weight()).collect();
            let index = Arc::new(ActiveIndex::new(weights));
            for (position, invoker) in self.invokers.iter().enumerate() {
                invoker.watch_active(&index, position);
            }
            index
        })
    }

    /// Increases whenever the membership or a weight changes.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The invokers, sorted by instance id.
    pub fn invokers(&self) -> &[Arc<Invoker>] {
        &self.invokers
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        self.invokers.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.invokers.is_empty()
    }
}

/// The instances one pick chooses from.
#[derive(Debug)]
pub struct Candidates<'a> {
    list: &'a InvokerList,
    excluded: &'a [InstanceId],
    now: Instant,
    warmup: Option<Duration>,
}

impl<'a> Candidates<'a> {
    /// A view of `list` at `now`, without the `excluded` instances (already tried in
    /// this call), with weights ramped over `warmup` if set.
    pub fn new(
        list: &'a InvokerList,
        excluded: &'a [InstanceId],
        now: Instant,
        warmup: Option<Duration>,
    ) -> Self {
        Self {
            list,
            excluded,
            now,
            warmup,
        }
    }

    /// Number of instances, selectable or not.
    pub fn len(&self) -> usize {
        self.list.invokers.len()
    }

    /// Whether there are no instances at all.
    pub fn is_empty(&self) -> bool {
        self.list.invokers.is_empty()
    }

    /// The invoker at `index`.
    pub fn get(&self, index: usize) -> &Arc<Invoker> {
        &self.list.invokers[index]
    }

    /// The list's version (changes with membership or weights).
    pub fn version(&self) -> u64 {
        self.list.version
    }

    /// The time of this pick.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Whether the instance at `index` waits for its probe: its ejection ended and no
    /// call has claimed the probe yet.
    pub fn is_due_for_probe(&self, index: usize) -> bool {
        self.list.invokers[index].health().availability(self.now) == Availability::Probe
    }

    /// Whether the instance at `index` may be picked: weight above 0, not tried in this
    /// call, and neither ejected nor closing (an instance due for its probe is
    /// selectable).
    pub fn is_selectable(&self, index: usize) -> bool {
        let invoker = &self.list.invokers[index];
        invoker.weight() > 0
            && !self.excluded.contains(invoker.id())
            && !matches!(
                invoker.health().availability(self.now),
                Availability::Unavailable { .. }
            )
    }

    /// The weight of the instance at `index`, with warm-up applied.
    pub fn weight(&self, index: usize) -> u32 {
        let invoker = &self.list.invokers[index];
        match self.warmup {
            Some(warmup) => warmed_weight(
                invoker.weight(),
                self.now.saturating_duration_since(invoker.first_seen()),
                warmup,
            ),
            None => invoker.weight(),
        }
    }

    /// The list's index of calls in flight (built on first use).
    pub(crate) fn active_index(&self) -> &Arc<ActiveIndex> {
        self.list.active_index()
    }

    /// Sum of registered weights (before warm-up).
    pub fn total_weight(&self) -> u64 {
        self.list.cumulative.last().copied().unwrap_or(0)
    }

    /// Whether every instance has the same registered weight.
    pub fn uniform_weights(&self) -> bool {
        self.list.uniform
    }

    /// The index owning `point` in `[0, total_weight)` of the registered weights.
    pub fn index_at_weight(&self, point: u64) -> usize {
        self.list
            .cumulative
            .partition_point(|&sum| sum <= point)
            .min(self.len().saturating_sub(1))
    }

    /// Indices of every selectable instance, in list order.
    pub fn selectable(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).filter(|&i| self.is_selectable(i))
    }

    /// Whether warm-up may lower the weight of the instance at `index` right now.
    pub(crate) fn warming(&self, index: usize) -> bool {
        self.warmup.is_some_and(|warmup| {
            self.now
                .saturating_duration_since(self.get(index).first_seen())
                < warmup
        })
    }

    /// A weighted draw over `indices` by effective weight; `None` if all weigh 0.
    pub(crate) fn weighted_among(&self, indices: &[usize], rng: &mut SmallRng) -> Option<usize> {
        let total: u64 = indices.iter().map(|&i| u64::from(self.weight(i))).sum();
        if total == 0 {
            return None;
        }
        let mut point = rng.random_range(..total);
        for &i in indices {
            let weight = u64::from(self.weight(i));
            if point < weight {
                return Some(i);
            }
            point -= weight;
        }
        indices.last().copied()
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use rand::SeedableRng;

    use super::*;
    use crate::invoker::tests::{settings, weighted_in};

    /// A list of invokers with the given weights, ids `i0`, `i1`, ..., sharing one
    /// directory's settings.
    pub(crate) fn list(weights: &[u32]) -> InvokerList {
        let settings = settings();
        settings.fleet.set_instances(weights.len());
        InvokerList::new(
            1,
            weights
                .iter()
                .enumerate()
                .map(|(n, &w)| weighted_in(n, w, settings.clone()))
                .collect(),
        )
    }

    /// Shares of `picks` draws, as fractions per index.
    pub(crate) fn shares(
        lb: &dyn LoadBalance,
        list: &InvokerList,
        picks: usize,
        seed: u64,
    ) -> Vec<f64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut counts = vec![0usize; list.len()];
        let candidates = Candidates::new(list, &[], Instant::now(), None);
        for _ in 0..picks {
            counts[lb
                .select(&candidates, &RequestInfo::default(), &mut rng)
                .unwrap()] += 1;
        }
        counts.iter().map(|&c| c as f64 / picks as f64).collect()
    }
}
