//! Consistent hashing of a request metadata key.

use std::sync::Arc;

use parking_lot::Mutex;
use rand::RngExt;
use rand::rngs::SmallRng;

use super::{Candidates, LoadBalance, RequestInfo};

/// Virtual nodes per instance (Dubbo's default).
pub const VIRTUAL_NODES: usize = 160;

/// Consistent hashing (Karger et al., 1997) of the request header named by the
/// reference's `hash_key` (default `rpc-hash-key`): requests with the same key go to the
/// same instance while it is selectable, and when instances come or go only the keys of
/// the neighbours on the ring move. Each instance owns 160 points on the ring. If the
/// owner of a key is not selectable, the next selectable instance clockwise takes it.
/// Requests without the header are spread at random. Weights are not used (as in Dubbo).
///
/// The ring is rebuilt only when the directory's list changes; a pick is a binary
/// search: O(log n).
#[derive(Debug, Default)]
pub struct ConsistentHash {
    ring: Mutex<Option<Arc<Ring>>>,
}

#[derive(Debug)]
struct Ring {
    version: u64,
    points: Vec<(u64, u32)>,
}

impl ConsistentHash {
    fn ring(&self, candidates: &Candidates<'_>) -> Arc<Ring> {
        let mut cached = self.ring.lock();
        if let Some(ring) = cached
            .as_ref()
            .filter(|ring| ring.version == candidates.version())
        {
            return ring.clone();
        }
        let mut points = Vec::with_capacity(candidates.len() * VIRTUAL_NODES);
        for index in 0..candidates.len() {
            let id = candidates.get(index).id().as_str();
            for node in 0..VIRTUAL_NODES {
                points.push((hash(format!("{id}#{node}").as_bytes()), index as u32));
            }
        }
        points.sort_unstable();
        let ring = Arc::new(Ring {
            version: candidates.version(),
            points,
        });
        *cached = Some(ring.clone());
        ring
    }
}

impl LoadBalance for ConsistentHash {
    fn reads_hash_key(&self) -> bool {
        true
    }

    fn select(
        &self,
        candidates: &Candidates<'_>,
        request: &RequestInfo<'_>,
        rng: &mut SmallRng,
    ) -> Option<usize> {
        let Some(key) = request.hash_key else {
            let selectable: Vec<usize> = candidates.selectable().collect();
            return (!selectable.is_empty())
                .then(|| selectable[rng.random_range(..selectable.len())]);
        };
        let ring = self.ring(candidates);
        if ring.points.is_empty() {
            return None;
        }
        let key_hash = hash(key);
        let start = ring.points.partition_point(|&(point, _)| point < key_hash);
        (0..ring.points.len())
            .map(|step| ring.points[(start + step) % ring.points.len()].1 as usize)
            .find(|&index| candidates.is_selectable(index))
    }
}

/// FNV-1a, then the SplitMix64 finalizer to spread the bits: stable across builds and
/// platforms, which std's hasher does not promise.
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::invoker::tests::weighted;
    use crate::loadbalance::InvokerList;
    use tokio::time::Instant;

    fn owner(lb: &ConsistentHash, list: &InvokerList, key: &str) -> String {
        let mut rng = SmallRng::seed_from_u64(0);
        let candidates = Candidates::new(list, &[], Instant::now(), None);
        let request = RequestInfo {
            path: "/s/M",
            hash_key: Some(key.as_bytes()),
        };
        let index = lb.select(&candidates, &request, &mut rng).unwrap();
        list.invokers()[index].id().to_string()
    }

    #[test]
    fn same_key_same_instance_and_few_keys_move_when_one_leaves() {
        let five = InvokerList::new(1, (0..5).map(|n| weighted(n, 100)).collect());
        let four = InvokerList::new(2, five.invokers()[..4].to_vec());
        let lb = ConsistentHash::default();
        let keys: Vec<String> = (0..2_000).map(|k| format!("user-{k}")).collect();
        let before: Vec<String> = keys.iter().map(|k| owner(&lb, &five, k)).collect();
        assert_eq!(
            before,
            keys.iter()
                .map(|k| owner(&lb, &five, k))
                .collect::<Vec<_>>()
        );
        let after: Vec<String> = keys.iter().map(|k| owner(&lb, &four, k)).collect();
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        let owned_by_removed = before.iter().filter(|b| b.as_str() == "i4").count();
        assert_eq!(
            moved, owned_by_removed,
            "only the removed instance's keys move"
        );
        // 160 virtual nodes keep the spread even: each of 5 owns 20 % ± 6 points.
        for n in 0..5 {
            let share = before.iter().filter(|b| **b == format!("i{n}")).count() as f64 / 2_000.0;
            assert!((share - 0.2).abs() < 0.06, "i{n}: {share}");
        }
    }

    #[test]
    fn an_unselectable_owner_passes_its_keys_clockwise() {
        let list = InvokerList::new(1, (0..3).map(|n| weighted(n, 100)).collect());
        let lb = ConsistentHash::default();
        let first = owner(&lb, &list, "k");
        let excluded = [list
            .invokers()
            .iter()
            .find(|i| i.id().as_str() == first)
            .unwrap()
            .id()
            .clone()];
        let candidates = Candidates::new(&list, &excluded, Instant::now(), None);
        let request = RequestInfo {
            path: "/s/M",
            hash_key: Some(b"k"),
        };
        let mut rng = SmallRng::seed_from_u64(0);
        let next = lb.select(&candidates, &request, &mut rng).unwrap();
        assert_ne!(list.invokers()[next].id().as_str(), first);
    }
}
