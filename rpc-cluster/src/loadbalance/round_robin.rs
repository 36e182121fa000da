//! Smooth weighted round-robin.

use std::collections::HashMap;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rpc_core::InstanceId;

use super::{Candidates, LoadBalance, RequestInfo};

/// Smooth weighted round-robin, the algorithm of nginx's upstream module: each pick adds
/// every selectable instance's weight to its running score, picks the highest score
/// (the first in list order on ties) and subtracts the total from it. Weights 5, 1, 1
/// give `a a b a c a a`: the heavy instance's turns are spread out, not bunched.
///
/// State is kept per method (as Dubbo does). Scores sit in a vector aligned with the
/// directory's list and are carried over by instance id when the list changes, so
/// members that stay keep their place in the rotation. A pick scans the list: O(n).
#[derive(Debug, Default)]
pub struct RoundRobin {
    scores: Mutex<HashMap<String, MethodScores>>,
}

#[derive(Debug, Default)]
struct MethodScores {
    version: u64,
    ids: Vec<InstanceId>,
    score: Vec<i64>,
}

impl MethodScores {
    /// Re-aligns the scores with `candidates`' list, keeping each staying instance's.
    fn align(&mut self, candidates: &Candidates<'_>) {
        if self.version == candidates.version() && self.score.len() == candidates.len() {
            return;
        }
        let old: HashMap<&InstanceId, i64> =
            self.ids.iter().zip(self.score.iter().copied()).collect();
        let ids: Vec<InstanceId> = (0..candidates.len())
            .map(|i| candidates.get(i).id().clone())
            .collect();
        let score = ids
            .iter()
            .map(|id| old.get(id).copied().unwrap_or(0))
            .collect();
        self.ids = ids;
        self.score = score;
        self.version = candidates.version();
    }
}

impl LoadBalance for RoundRobin {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        request: &RequestInfo<'_>,
        _rng: &mut SmallRng,
    ) -> Option<usize> {
        let mut methods = self.scores.lock();
        let scores = match methods.get_mut(request.path) {
            Some(scores) => scores,
            None => methods.entry(request.path.to_owned()).or_default(),
        };
        scores.align(candidates);
        let mut total = 0i64;
        let mut best: Option<(usize, i64)> = None;
        for index in candidates.selectable() {
            let weight = i64::from(candidates.weight(index));
            total += weight;
            let score = &mut scores.score[index];
            *score += weight;
            if best.is_none_or(|(_, top)| *score > top) {
                best = Some((index, *score));
            }
        }
        let (index, _) = best?;
        scores.score[index] -= total;
        Some(index)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::loadbalance::testing::list;
    use tokio::time::Instant;

    fn sequence(lb: &RoundRobin, weights: &[u32], picks: usize, path: &str) -> String {
        let list = list(weights);
        let candidates = Candidates::new(&list, &[], Instant::now(), None);
        let mut rng = SmallRng::seed_from_u64(0);
        let request = RequestInfo {
            path,
            hash_key: None,
        };
        (0..picks)
            .map(|_| (b'a' + lb.select(&candidates, &request, &mut rng).unwrap() as u8) as char)
            .collect()
    }

    #[test]
    fn weights_5_1_1_give_the_nginx_sequence() {
        assert_eq!(
            sequence(&RoundRobin::default(), &[5, 1, 1], 7, "/s/M"),
            "aabacaa"
        );
        assert_eq!(
            sequence(&RoundRobin::default(), &[5, 1, 1], 14, "/s/M"),
            "aabacaaaabacaa"
        );
    }

    #[test]
    fn state_is_kept_per_method() {
        let lb = RoundRobin::default();
        assert_eq!(sequence(&lb, &[1, 1], 1, "/s/A"), "a");
        // Another method starts its own rotation.
        assert_eq!(sequence(&lb, &[1, 1], 1, "/s/B"), "a");
    }

    #[test]
    fn equal_weights_rotate() {
        assert_eq!(
            sequence(&RoundRobin::default(), &[1, 1, 1], 6, "/s/M"),
            "abcabc"
        );
    }
}
