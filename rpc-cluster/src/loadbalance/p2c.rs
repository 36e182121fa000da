//! Power of two choices over peak-EWMA load.

use rand::RngExt;
use rand::rngs::SmallRng;

use super::{Candidates, DRAWS, LoadBalance, RequestInfo};

/// Power of two choices (Mitzenmacher, "The Power of Two Choices in Randomized Load
/// Balancing", 2001), with Finagle's and tower's load: `(in-flight + 1) × peak-EWMA
/// latency`, divided by the instance's weight (with warm-up). Two distinct selectable
/// instances are drawn uniformly and the less loaded one is picked.
///
/// The load is measured by this consumer alone — calls in flight and latencies it saw —
/// so providers need not report anything. Failed calls enter the latency estimate as
/// the failure penalty, so an instance that fails fast looks slow, not fast. An
/// instance left out while its peers answer relaxes back to the fleet's latency within
/// a few rounds of answers (`ewma.rs`), so equal providers share the load evenly over
/// any few seconds rather than one of them taking it all while the other's last
/// outlier slowly decays. A pick costs O(1).
#[derive(Clone, Copy, Debug, Default)]
pub struct P2c;

impl LoadBalance for P2c {
    fn select(
        &self,
        candidates: &Candidates<'_>,
        _request: &RequestInfo<'_>,
        rng: &mut SmallRng,
    ) -> Option<usize> {
        let first = draw(candidates, rng, None)?;
        let Some(second) = draw(candidates, rng, Some(first)) else {
            return Some(first);
        };
        let cost = |index: usize| {
            candidates.get(index).load(candidates.now())
                / f64::from(candidates.weight(index).max(1))
        };
        // An instance whose ejection ended waits for one call, its probe: it wins the
        // pair whatever its load says. Its estimate still holds the penalty of the
        // failures that ejected it, and would keep it from ever being picked — and so
        // from ever being restored — while its peers answer (found in the lab of
        // network namespaces: a provider whose link came back got no call for seconds).
        for index in [first, second] {
            if candidates.is_due_for_probe(index) {
                return Some(index);
            }
        }
        let (a, b) = (cost(first), cost(second));
        if a < b || (a == b && rng.random::<bool>()) {
            Some(first)
        } else {
            Some(second)
        }
    }
}

/// A uniformly drawn selectable index other than `other`.
fn draw(candidates: &Candidates<'_>, rng: &mut SmallRng, other: Option<usize>) -> Option<usize> {
    let len = candidates.len();
    match (len, other) {
        (0, _) | (1, Some(_)) => return None,
        (1, None) => return candidates.is_selectable(0).then_some(0),
        (2, Some(other)) => return candidates.is_selectable(1 - other).then_some(1 - other),
        _ => {}
    }
    for _ in 0..DRAWS {
        let index = rng.random_range(..len);
        if Some(index) != other && candidates.is_selectable(index) {
            return Some(index);
        }
    }
    let selectable: Vec<usize> = candidates
        .selectable()
        .filter(|&i| Some(i) != other)
        .collect();
    (!selectable.is_empty()).then(|| selectable[rng.random_range(..selectable.len())])
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use std::time::Duration;

    use super::*;
    use crate::loadbalance::testing::list;
    use tokio::time::Instant;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn share_of_first(list: &crate::loadbalance::InvokerList, picks: usize) -> f64 {
        let mut rng = SmallRng::seed_from_u64(11);
        let candidates = Candidates::new(list, &[], Instant::now(), None);
        let first = (0..picks)
            .filter(|_| P2c.select(&candidates, &RequestInfo::default(), &mut rng) == Some(0))
            .count();
        first as f64 / picks as f64
    }

    #[tokio::test(start_paused = true)]
    async fn the_fast_instance_gets_most_traffic() {
        let list = list(&[100, 100, 100]);
        let now = Instant::now();
        list.invokers()[0].observe_latency(ms(1), now);
        list.invokers()[1].observe_latency(ms(50), now);
        list.invokers()[2].observe_latency(ms(50), now);
        // The fast one wins every comparison it is in: 2 of the 3 pairs.
        let share = share_of_first(&list, 30_000);
        assert!(share > 0.6, "fast instance share {share}");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_in_flight_count_as_load() {
        let list = list(&[100, 100]);
        let now = Instant::now();
        for invoker in list.invokers() {
            invoker.observe_latency(ms(10), now);
        }
        let _busy: Vec<_> = (0..3).map(|_| list.invokers()[0].start_call()).collect();
        assert_eq!(share_of_first(&list, 1_000), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fast_failing_instance_does_not_look_fast() {
        // The cluster records a failure as the failure penalty (1 s by default) even
        // when the failure came back in 0.1 ms.
        let list = list(&[100, 100]);
        let now = Instant::now();
        list.invokers()[0].observe_latency(Duration::from_secs(1), now);
        list.invokers()[1].observe_latency(ms(20), now);
        assert_eq!(share_of_first(&list, 1_000), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_instance_due_for_its_probe_wins_its_pair_whatever_its_estimate() {
        let list = list(&[100, 100]);
        let now = Instant::now();
        list.invokers()[0].observe_penalty(Duration::from_secs(1), now);
        list.invokers()[1].observe_latency(ms(20), now);
        let health = list.invokers()[0].health();
        assert!(health.eject(now, now + ms(100), 1));
        assert_eq!(share_of_first(&list, 100), 0.0, "not while it is ejected");
        tokio::time::advance(ms(101)).await;
        assert_eq!(share_of_first(&list, 100), 1.0, "due for its probe: picked");
        assert!(health.begin_probe(Instant::now()));
        assert_eq!(share_of_first(&list, 100), 0.0, "one probe at a time");
    }

    #[tokio::test(start_paused = true)]
    async fn one_selectable_instance_is_picked_and_none_gives_none() {
        let one = list(&[100]);
        assert_eq!(share_of_first(&one, 100), 1.0);
        let mut rng = SmallRng::seed_from_u64(1);
        let excluded = [one.invokers()[0].id().clone()];
        let candidates = Candidates::new(&one, &excluded, Instant::now(), None);
        assert_eq!(
            P2c.select(&candidates, &RequestInfo::default(), &mut rng),
            None
        );
    }
}
