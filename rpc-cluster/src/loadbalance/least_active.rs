//! Least active.

use rand::RngExt;
use rand::rngs::SmallRng;
use smallvec::SmallVec;

use super::{Candidates, DRAWS, LoadBalance, RequestInfo};

/// Picks the selectable instance with the fewest calls in flight from this consumer;
/// among equals, weighted random — the semantics of Dubbo's `LeastActiveLoadBalance`.
///
/// The list's index of calls in flight (`crate::active_index`, a segment tree the
/// invokers keep current) gives the least count and the weight tied at it at its root,
/// and a weighted draw among the ties walks one path: O(log n) per pick instead of a
/// scan. A drawn instance that may not be picked now (ejected, closing, already tried)
/// is masked in the tree for the rest of this pick and the draw repeats; a warming
/// instance is accepted with probability `warmed / registered` (rejection sampling, as
/// `Random` does), so the tie shares follow the warmed weights. After `DRAWS` misses
/// the pick falls back to the scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct LeastActive;

impl LoadBalance for LeastActive {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        _request: &RequestInfo<'_>,
        rng: &mut SmallRng,
    ) -> Option<usize> {
        let index = candidates.active_index();
        let mut tree = index.lock();
        let mut masked: SmallVec<[usize; DRAWS]> = SmallVec::new();
        let mut picked = None;
        for _ in 0..DRAWS {
            let Some(tied) = tree.tied_weight() else {
                break;
            };
            let position = tree.find(rng.random_range(..tied));
            if !candidates.is_selectable(position) {
                tree.mask(position);
                masked.push(position);
                continue;
            }
            if candidates.warming(position) {
                let registered = candidates.get(position).weight().max(1);
                if rng.random_range(..registered) >= candidates.weight(position) {
                    continue;
                }
            }
            picked = Some(position);
            break;
        }
        for position in masked {
            tree.set(position, candidates.get(position).active());
        }
        drop(tree);
        picked.or_else(|| scan(candidates, rng))
    }
}

/// The definition, by a scan of the list: O(n).
fn scan(candidates: &Candidates<'_>, rng: &mut SmallRng) -> Option<usize> {
    let mut least = usize::MAX;
    let mut ties = Vec::new();
    for index in candidates.selectable() {
        let active = candidates.get(index).active();
        if active < least {
            least = active;
            ties.clear();
        }
        if active == least {
            ties.push(index);
        }
    }
    match ties.as_slice() {
        [] => None,
        [only] => Some(*only),
        _ => candidates
            .weighted_among(&ties, rng)
            .or_else(|| Some(ties[rng.random_range(..ties.len())])),
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::loadbalance::testing::{list, shares};
    use tokio::time::Instant;

    #[test]
    fn picks_the_instance_with_fewest_calls_in_flight() {
        let list = list(&[100, 100, 100]);
        let _busy = [
            list.invokers()[0].start_call(),
            list.invokers()[2].start_call(),
        ];
        let mut rng = SmallRng::seed_from_u64(5);
        let candidates = Candidates::new(&list, &[], Instant::now(), None);
        for _ in 0..50 {
            assert_eq!(
                LeastActive.select(&candidates, &RequestInfo::default(), &mut rng),
                Some(1)
            );
        }
    }

    #[test]
    fn ties_follow_weights() {
        let shares = shares(&LeastActive, &list(&[3, 1]), 40_000, 9);
        assert!((shares[0] - 0.75).abs() < 0.01, "{shares:?}");
    }
}
