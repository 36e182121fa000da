//! Weighted random.

use rand::RngExt;
use rand::rngs::SmallRng;

use super::{Candidates, DRAWS, LoadBalance, RequestInfo};

/// Weighted random: each selectable instance is picked with probability proportional to
/// its weight (with warm-up). Draws by binary search over prefix sums of the registered
/// weights, then accepts a warming instance with probability `warmed / registered`
/// (rejection sampling), so the shares are exact and a pick costs O(log n). When draws
/// keep hitting unselectable instances it falls back to a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct Random;

impl LoadBalance for Random {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        _request: &RequestInfo<'_>,
        rng: &mut SmallRng,
    ) -> Option<usize> {
        let total = candidates.total_weight();
        if total == 0 {
            return None;
        }
        for _ in 0..DRAWS {
            let index = if candidates.uniform_weights() {
                rng.random_range(..candidates.len())
            } else {
                candidates.index_at_weight(rng.random_range(..total))
            };
            if !candidates.is_selectable(index) {
                continue;
            }
            if candidates.warming(index) {
                let registered = candidates.get(index).weight();
                if rng.random_range(..registered) >= candidates.weight(index) {
                    continue;
                }
            }
            return Some(index);
        }
        let selectable: Vec<usize> = candidates.selectable().collect();
        candidates.weighted_among(&selectable, rng)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::loadbalance::InvokerList;
    use crate::loadbalance::testing::{list, shares};
    use tokio::time::Instant;

    fn assert_shares(weights: &[u32]) {
        let list = list(weights);
        let total: u32 = weights.iter().sum();
        let shares = shares(&Random, &list, 40_000, 42);
        for (share, &weight) in shares.iter().zip(weights) {
            let expected = f64::from(weight) / f64::from(total);
            assert!(
                (share - expected).abs() <= 0.01,
                "weights {weights:?}: share {share} vs {expected}"
            );
        }
    }

    #[test]
    fn shares_follow_weights_within_one_point() {
        assert_shares(&[100, 100, 100, 100]);
        assert_shares(&[10, 0, 10]);
        assert_shares(&[5, 1]);
    }

    #[test]
    fn weight_zero_is_never_picked_and_one_instance_always_is() {
        let with_zero = shares(&Random, &list(&[10, 0, 10]), 40_000, 1);
        assert_eq!(with_zero[1], 0.0);
        let single = shares(&Random, &list(&[3]), 100, 1);
        assert_eq!(single[0], 1.0);
    }

    #[test]
    fn no_instance_or_only_zero_weights_give_none() {
        let mut rng = SmallRng::seed_from_u64(1);
        let empty = InvokerList::default();
        let candidates = Candidates::new(&empty, &[], Instant::now(), None);
        assert_eq!(
            Random.select(&candidates, &RequestInfo::default(), &mut rng),
            None
        );
        let zeros = list(&[0, 0]);
        let candidates = Candidates::new(&zeros, &[], Instant::now(), None);
        assert_eq!(
            Random.select(&candidates, &RequestInfo::default(), &mut rng),
            None
        );
    }

    #[test]
    fn excluded_instances_are_skipped() {
        let list = list(&[100, 100, 100]);
        let mut rng = SmallRng::seed_from_u64(3);
        let excluded = [
            list.invokers()[0].id().clone(),
            list.invokers()[2].id().clone(),
        ];
        let candidates = Candidates::new(&list, &excluded, Instant::now(), None);
        for _ in 0..100 {
            assert_eq!(
                Random.select(&candidates, &RequestInfo::default(), &mut rng),
                Some(1)
            );
        }
    }
}
