//! Warm-up (slow start): a new instance's weight ramps up linearly.

use std::time::Duration;

/// The weight of an instance seen `uptime` ago, ramping linearly from 1 to `weight`
/// over `warmup` (Dubbo's rule). Weight 0 stays 0; a zero `warmup` means no ramp.
pub fn warmed_weight(weight: u32, uptime: Duration, warmup: Duration) -> u32 {
    if weight == 0 || warmup.is_zero() || uptime >= warmup {
        return weight;
    }
    let ramped = f64::from(weight) * uptime.as_secs_f64() / warmup.as_secs_f64();
    (ramped as u32).clamp(1, weight)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;
    use crate::invoker::tests::weighted;
    use crate::loadbalance::{
        Candidates, InvokerList, LeastActive, LoadBalance, P2c, Random, RequestInfo, RoundRobin,
    };
    use tokio::time::Instant;

    #[test]
    fn ramps_linearly_from_one() {
        let warmup = Duration::from_secs(100);
        assert_eq!(warmed_weight(100, Duration::ZERO, warmup), 1);
        assert_eq!(warmed_weight(100, Duration::from_secs(25), warmup), 25);
        assert_eq!(warmed_weight(100, Duration::from_secs(100), warmup), 100);
        assert_eq!(warmed_weight(0, Duration::from_secs(50), warmup), 0);
        assert_eq!(
            warmed_weight(100, Duration::from_secs(1), Duration::ZERO),
            100
        );
    }

    /// A new instance gets a small share at first and its full share after warm-up,
    /// under every algorithm that uses weights.
    #[tokio::test(start_paused = true)]
    async fn applies_to_every_weighted_algorithm() {
        let warmup = Some(Duration::from_secs(100));
        let old = weighted(0, 100);
        tokio::time::advance(Duration::from_secs(90)).await;
        let new = weighted(1, 100);
        let list = InvokerList::new(1, vec![old, new]);
        tokio::time::advance(Duration::from_secs(10)).await;
        let share_of_new = |lb: &dyn LoadBalance| {
            let mut rng = SmallRng::seed_from_u64(7);
            let candidates = Candidates::new(&list, &[], Instant::now(), warmup);
            let picks = (0..10_000)
                .filter(|_| lb.select(&candidates, &RequestInfo::default(), &mut rng) == Some(1))
                .count();
            picks as f64 / 10_000.0
        };
        let algorithms: [&dyn LoadBalance; 4] =
            [&Random, &RoundRobin::default(), &P2c, &LeastActive];
        for lb in algorithms {
            // Weights 100 and 10: the new instance gets about 1/11 of the picks or less.
            let share = share_of_new(lb);
            assert!(share < 0.12, "{lb:?} gave the warming instance {share}");
        }
        tokio::time::advance(Duration::from_secs(90)).await;
        for lb in [&Random as &dyn LoadBalance, &RoundRobin::default()] {
            let share = share_of_new(lb);
            assert!(
                (0.45..0.55).contains(&share),
                "{lb:?} after warm-up: {share}"
            );
        }
    }
}
