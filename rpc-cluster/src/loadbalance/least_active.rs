//! Least active.

use rand::RngExt;
use rand::rngs::SmallRng;

use super::{Candidates, LoadBalance, RequestInfo};

/// Picks the selectable instance with the fewest calls in flight from this consumer;
/// among equals, weighted random (Dubbo's `leastactive`). A pick scans the list: O(n).
#[derive(Clone, Copy, Debug, Default)]
pub struct LeastActive;

impl LoadBalance for LeastActive {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        _request: &RequestInfo<'_>,
        rng: &mut SmallRng,
    ) -> Option<usize> {
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
