//! Where each call's random numbers come from.
//!
//! Every random choice on a call's path — the load balance's draws, failover's backoff,
//! the blacklist's ejection jitter — comes from one generator the call owns: rand's
//! `SmallRng` (Xoshiro256++ on 64-bit targets), small and fast and not cryptographic,
//! which balancing does not need. Nothing on the path draws from a global generator.
//!
//! A call's generator is seeded from one kept per thread, so making it takes no lock
//! and no allocation. A channel given a seed (`ClusterChannel::with_seed`, for tests)
//! seeds each call's generator from that seed and the call's number instead: the same
//! calls in the same order make the same choices.

use std::cell::RefCell;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Odd constant of Fibonacci hashing (2^64 / φ): spreads call numbers over the seed
/// space, so call `n` of seed `s` does not share a stream with call `n - 1` of `s + 1`.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

thread_local! {
    /// The generator this thread seeds calls from.
    static THREAD_SEEDS: RefCell<SmallRng> = RefCell::new(SmallRng::seed_from_u64(entropy()));
}

/// A seed no other thread or process is likely to share: std's hasher keys are drawn
/// from the operating system once per thread, which is all the entropy balancing needs.
fn entropy() -> u64 {
    RandomState::new().hash_one(std::thread::current().id())
}

/// The source of every call's generator for one channel.
#[derive(Debug, Default)]
pub(crate) struct RngSource {
    seeded: AtomicBool,
    seed: AtomicU64,
    /// Calls given a generator since the seed was set.
    calls: AtomicU64,
}

impl RngSource {
    /// From now on, derive every call's generator from `seed` and the call's number.
    pub(crate) fn set_seed(&self, seed: u64) {
        self.seed.store(seed, Ordering::Relaxed);
        self.calls.store(0, Ordering::Relaxed);
        self.seeded.store(true, Ordering::Release);
    }

    /// The generator of one new call.
    pub(crate) fn for_call(&self) -> SmallRng {
        if self.seeded.load(Ordering::Acquire) {
            let call = self.calls.fetch_add(1, Ordering::Relaxed);
            return SmallRng::seed_from_u64(
                self.seed.load(Ordering::Relaxed) ^ call.wrapping_mul(GOLDEN),
            );
        }
        // `try_with` fails only while the thread is being torn down.
        THREAD_SEEDS
            .try_with(|seeds| SmallRng::seed_from_u64(seeds.borrow_mut().next_u64()))
            .unwrap_or_else(|_| SmallRng::seed_from_u64(entropy()))
    }
}

/// From now on, the calls of unseeded channels made on this thread draw their
/// generators from `seed`: a simulation running every host on one thread (the fleet
/// simulator) makes their choices repeat with its seed. Other threads are unaffected.
pub fn seed_this_thread(seed: u64) {
    // `try_with` fails only while the thread is being torn down: nothing to seed then.
    let _ = THREAD_SEEDS.try_with(|seeds| *seeds.borrow_mut() = SmallRng::seed_from_u64(seed));
}

/// A generator of its own for one of several attempts sent at once, drawn from the
/// call's, so a seeded call stays reproducible however its attempts interleave.
pub(crate) fn fork(rng: &mut SmallRng) -> SmallRng {
    SmallRng::seed_from_u64(rng.next_u64())
}

#[cfg(test)]
mod tests {
    use rand::RngExt;

    use super::*;

    fn draws(source: &RngSource) -> Vec<u64> {
        (0..4)
            .map(|_| source.for_call().random_range(..1_000_000))
            .collect()
    }

    #[test]
    fn a_seed_makes_the_calls_repeat_and_each_call_differ() {
        let (a, b) = (RngSource::default(), RngSource::default());
        a.set_seed(7);
        b.set_seed(7);
        let first = draws(&a);
        assert_eq!(first, draws(&b), "same seed, same calls");
        assert!(
            first.windows(2).any(|w| w[0] != w[1]),
            "calls differ: {first:?}"
        );
        b.set_seed(8);
        assert_ne!(draws(&b), first);
    }

    #[test]
    fn unseeded_calls_differ() {
        let source = RngSource::default();
        let calls = draws(&source);
        assert!(calls.windows(2).any(|w| w[0] != w[1]), "{calls:?}");
    }
}
