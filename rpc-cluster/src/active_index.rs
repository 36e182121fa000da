//! An index of calls in flight over one directory list, for the least-active balance.
//!
//! Least-active must find, among thousands of instances, the ones with the fewest calls
//! in flight and draw among them by weight. Scanning the list on every pick costs
//! O(n) (87 µs at 10 000 instances). Instead each list keeps, once a least-active pick
//! first asks for it, a segment tree whose leaves are its instances' in-flight counts
//! and whose inner nodes hold the least count below them and the summed weight of the
//! instances at that count. The root then answers "fewest in flight, and how much
//! weight ties there" in O(1), and a weighted draw among the ties walks one path down,
//! O(log n). Each invoker reports its new count to the tree of the list it belongs to
//! when a call starts or ends (O(log n) under the tree's lock), so the tree is never
//! stale and no pick has to scan.
//!
//! This file knows nothing of invokers: positions are indices into the list, counts
//! are read from the atomic the caller hands in, under the tree's lock, so the last
//! writer always writes the latest value however updates interleave.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

/// The count a leaf holds while it cannot be picked (weight 0, or masked for a pick).
const UNPICKABLE: u32 = u32::MAX;

/// One node: the least in-flight count below it and the weight of the leaves at it.
#[derive(Clone, Copy, Debug)]
struct Node {
    least: u32,
    weight: u64,
}

const EMPTY: Node = Node {
    least: UNPICKABLE,
    weight: 0,
};

fn combine(a: Node, b: Node) -> Node {
    match a.least.cmp(&b.least) {
        std::cmp::Ordering::Less => a,
        std::cmp::Ordering::Greater => b,
        std::cmp::Ordering::Equal => Node {
            least: a.least,
            weight: a.weight + b.weight,
        },
    }
}

/// The in-flight counts of one list's instances (see the module documentation).
#[derive(Debug)]
pub(crate) struct ActiveIndex {
    tree: Mutex<Tree>,
}

/// Where one invoker reports its in-flight count.
#[derive(Debug)]
pub(crate) struct ActiveSlot {
    pub(crate) index: std::sync::Arc<ActiveIndex>,
    pub(crate) position: usize,
}

/// The tree itself, in the usual array layout: node `k` has children `2k` and `2k+1`,
/// leaf `i` is node `leaves + i`.
#[derive(Debug)]
pub(crate) struct Tree {
    leaves: usize,
    weights: Vec<u32>,
    nodes: Vec<Node>,
}

impl ActiveIndex {
    /// An index over instances of the given registered weights, every count unknown
    /// (unpickable) until [`ActiveIndex::refresh`] reports it.
    pub(crate) fn new(weights: Vec<u32>) -> Self {
        let leaves = weights.len().next_power_of_two().max(1);
        Self {
            tree: Mutex::new(Tree {
                leaves,
                weights,
                nodes: vec![EMPTY; 2 * leaves],
            }),
        }
    }

    /// Sets the leaf at `position` to the current value of `active`, read under the lock.
    pub(crate) fn refresh(&self, position: usize, active: &AtomicUsize) {
        let mut tree = self.tree.lock();
        let count = active.load(Ordering::SeqCst);
        tree.set(position, count);
    }

    /// The tree, locked for one pick.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Tree> {
        self.tree.lock()
    }
}

impl Tree {
    /// Sets leaf `position` to `count` calls in flight (a weight-0 leaf stays unpickable).
    pub(crate) fn set(&mut self, position: usize, count: usize) {
        let Some(&weight) = self.weights.get(position) else {
            return;
        };
        let leaf = if weight == 0 {
            EMPTY
        } else {
            Node {
                least: u32::try_from(count)
                    .unwrap_or(UNPICKABLE - 1)
                    .min(UNPICKABLE - 1),
                weight: u64::from(weight),
            }
        };
        self.put(position, leaf);
    }

    /// Makes leaf `position` unpickable until it is [`Tree::set`] again.
    pub(crate) fn mask(&mut self, position: usize) {
        if position < self.weights.len() {
            self.put(position, EMPTY);
        }
    }

    fn put(&mut self, position: usize, leaf: Node) {
        let mut k = self.leaves + position;
        self.nodes[k] = leaf;
        while k > 1 {
            k /= 2;
            self.nodes[k] = combine(self.nodes[2 * k], self.nodes[2 * k + 1]);
        }
    }

    /// The summed weight of the pickable leaves with the fewest calls in flight; `None`
    /// when no leaf is pickable.
    pub(crate) fn tied_weight(&self) -> Option<u64> {
        let root = self.nodes[1];
        (root.least != UNPICKABLE && root.weight > 0).then_some(root.weight)
    }

    /// The position owning `point` in `[0, tied_weight)` among the leaves with the
    /// fewest calls in flight.
    pub(crate) fn find(&self, mut point: u64) -> usize {
        let least = self.nodes[1].least;
        let mut k = 1;
        while k < self.leaves {
            let left = self.nodes[2 * k];
            k = if left.least == least && point < left.weight {
                2 * k
            } else {
                if left.least == least {
                    point -= left.weight;
                }
                2 * k + 1
            };
        }
        (k - self.leaves).min(self.weights.len().saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(weights: &[u32], active: &[usize]) -> ActiveIndex {
        let index = ActiveIndex::new(weights.to_vec());
        for (position, &count) in active.iter().enumerate() {
            index.refresh(position, &AtomicUsize::new(count));
        }
        index
    }

    #[test]
    fn the_root_holds_the_least_count_and_its_weight() {
        let index = index(&[3, 1, 5, 2, 0], &[1, 0, 2, 0, 0]);
        let tree = index.lock();
        assert_eq!(tree.tied_weight(), Some(3));
        let found: Vec<usize> = (0..3).map(|p| tree.find(p)).collect();
        assert_eq!(found, [1, 3, 3]);
    }

    #[test]
    fn masked_and_weightless_leaves_are_never_found() {
        let index = index(&[1, 1, 0], &[0, 0, 0]);
        let mut tree = index.lock();
        tree.mask(0);
        assert_eq!(tree.tied_weight(), Some(1));
        assert_eq!(tree.find(0), 1);
        tree.mask(1);
        assert_eq!(tree.tied_weight(), None);
        tree.set(0, 4);
        assert_eq!((tree.tied_weight(), tree.find(0)), (Some(1), 0));
    }
}
