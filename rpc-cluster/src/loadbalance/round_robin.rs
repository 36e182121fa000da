//! Smooth weighted round-robin.

use std::collections::HashMap;

use parking_lot::Mutex;
use rand::rngs::SmallRng;

use super::rr_schedule::Schedule;
use super::{Candidates, LoadBalance, RequestInfo};

/// Smooth weighted round-robin, the algorithm of nginx's upstream module
/// (`ngx_http_upstream_get_peer`): each pick adds every selectable instance's weight to
/// its running score, picks the highest score (the first in list order on ties) and
/// subtracts the total from it. Weights 5, 1, 1 give `a a b a c a a`: the heavy
/// instance's turns are spread out, not bunched.
///
/// State is kept per method (as Dubbo does). Scores are carried over by instance id when
/// the list changes, so members that stay keep their place in the rotation. The scores
/// are kept lazily in one heap per distinct weight (`rr_schedule.rs`), so a pick costs
/// O(k + log n) for `k` distinct weights instead of nginx's scan of all `n`.
#[derive(Debug, Default)]
pub struct RoundRobin {
    methods: Mutex<HashMap<String, Schedule>>,
}

impl LoadBalance for RoundRobin {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        request: &RequestInfo<'_>,
        _rng: &mut SmallRng,
    ) -> Option<usize> {
        let mut methods = self.methods.lock();
        let schedule = match methods.get_mut(request.path) {
            Some(schedule) => schedule,
            None => methods.entry(request.path.to_owned()).or_default(),
        };
        schedule.align(candidates);
        schedule.pick(candidates)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::loadbalance::InvokerList;
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

    /// nginx's definition, by a scan, every instance selectable.
    fn nginx(weights: &[u32], picks: usize) -> String {
        let mut score = vec![0i64; weights.len()];
        let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
        (0..picks)
            .map(|_| {
                let mut best = 0;
                for (i, &w) in weights.iter().enumerate() {
                    score[i] += i64::from(w);
                    if score[i] > score[best] {
                        best = i;
                    }
                }
                score[best] -= total;
                (b'a' + best as u8) as char
            })
            .collect()
    }

    #[test]
    fn the_lazy_scores_give_nginx_sequence_for_mixed_weights() {
        for weights in [
            &[5, 1, 1][..],
            &[3, 3, 2, 2, 1, 7, 1, 3],
            &[100, 75, 50, 125, 100, 50],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        ] {
            let picks = 3 * weights.iter().sum::<u32>() as usize;
            assert_eq!(
                sequence(&RoundRobin::default(), weights, picks, "/s/M"),
                nginx(weights, picks),
                "weights {weights:?}"
            );
        }
    }

    /// A new instance takes its turn among the others, not every turn until it caught
    /// up with them: the turns charged to one left out (closing, ejected) lower every
    /// score alike, and a newcomer entering at 0 stood far above the rest (the fleet
    /// simulator's seed 2134: after a provider's restart, the new instance took every
    /// call for half a second while another's offline had lasted three).
    #[test]
    fn a_new_instance_joins_the_rotation_without_a_burst() {
        let lb = RoundRobin::default();
        let three = list(&[1, 1, 1]);
        let closing = [three.invokers()[1].id().clone()];
        let candidates = Candidates::new(&three, &closing, Instant::now(), None);
        let mut rng = SmallRng::seed_from_u64(0);
        for _ in 0..300 {
            lb.select(&candidates, &RequestInfo::default(), &mut rng);
        }
        let newcomer = crate::invoker::tests::weighted(7, 1);
        let four = InvokerList::new(
            three.version() + 1,
            three.invokers().iter().cloned().chain([newcomer]).collect(),
        );
        let candidates = Candidates::new(&four, &closing, Instant::now(), None);
        let picks: Vec<usize> = (0..30)
            .map(|_| {
                lb.select(&candidates, &RequestInfo::default(), &mut rng)
                    .unwrap()
            })
            .collect();
        for (index, name) in [(0, "a"), (2, "c"), (3, "the newcomer")] {
            let turns = picks.iter().filter(|&&pick| pick == index).count();
            assert_eq!(turns, 10, "{name} took {turns} of 30 turns: {picks:?}");
        }
    }

    #[test]
    fn an_excluded_instance_is_skipped_and_the_others_keep_rotating() {
        let lb = RoundRobin::default();
        let list = list(&[1, 1, 1]);
        let excluded = [list.invokers()[1].id().clone()];
        let candidates = Candidates::new(&list, &excluded, Instant::now(), None);
        let mut rng = SmallRng::seed_from_u64(0);
        let picks: String = (0..6)
            .map(|_| {
                let index = lb.select(&candidates, &RequestInfo::default(), &mut rng);
                (b'a' + index.unwrap() as u8) as char
            })
            .collect();
        assert_eq!(picks, "acacac");
        let all = [list.invokers()[0].id().clone(), excluded[0].clone()];
        let only_c = Candidates::new(&list, &all, Instant::now(), None);
        assert_eq!(
            lb.select(&only_c, &RequestInfo::default(), &mut rng),
            Some(2)
        );
    }
}
