//! The state of one method's smooth weighted round-robin, kept so a pick need not scan.
//!
//! nginx's algorithm adds every instance's weight to its score on each pick, picks the
//! highest score and subtracts the total weight from it: O(n) per pick. Here a score
//! is kept *lazily* as `base + weight × tick`, where `tick` counts the picks made: the
//! "add every weight" step is `tick += 1`, and only the picked instance's base changes
//! (`base -= total`). Instances of equal weight keep their order under that step, so
//! each distinct weight has a max-heap of bases (ties: lower list index first), and a
//! pick compares the heads of the `k` heaps and moves one entry: O(k + log n), where
//! `k` is the number of distinct weights (a handful in practice). With every instance
//! selectable the sequence is nginx's exactly.
//!
//! An instance whose turn comes while it may not be picked (ejected, closing, already
//! tried, or a warming instance short of credit) is charged the turn as if picked and
//! the next head is taken: it neither sends nor hoards score while it is out, so it
//! does not come back to a burst. As that lowers every score alike, a new instance
//! enters at the mean score of those that stay, not at 0 (far above them, it would take
//! every turn until it caught up). A warming instance earns `warmed / registered` of a
//! turn each time its turn comes, so its share ramps with its warm-up weight.

use std::collections::{BinaryHeap, HashMap};

use rpc_core::InstanceId;

use super::Candidates;

/// Turns skipped in one pick before falling back to a scan of the list.
const SKIPS: usize = 32;

/// One instance's place in its weight's heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    base: i128,
    index: usize,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.base
            .cmp(&other.base)
            .then_with(|| other.index.cmp(&self.index))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The instances of one registered weight.
#[derive(Debug)]
struct Class {
    weight: i128,
    heap: BinaryHeap<Entry>,
}

/// One method's rotation over one version of the directory's list.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    version: u64,
    ids: Vec<InstanceId>,
    classes: Vec<Class>,
    /// Which class holds each index (`usize::MAX`: weight 0, not in the rotation).
    class_of: Vec<usize>,
    /// Turns a warming instance has earned but not used, per index.
    credit: Vec<f32>,
    tick: i128,
    total: i128,
}

impl Schedule {
    /// The score of every instance now (0 for those not in the rotation).
    fn scores(&self) -> Vec<i128> {
        let mut scores = vec![0; self.ids.len()];
        for class in &self.classes {
            for entry in class.heap.iter() {
                scores[entry.index] = entry.base + class.weight * self.tick;
            }
        }
        scores
    }

    /// Re-aligns with `candidates`' list when it changed, keeping each staying
    /// instance's score. O(n), once per list version.
    pub(super) fn align(&mut self, candidates: &Candidates<'_>) {
        if self.version == candidates.version() && self.ids.len() == candidates.len() {
            return;
        }
        let old: HashMap<&InstanceId, i128> = self.ids.iter().zip(self.scores()).collect();
        let ids: Vec<InstanceId> = (0..candidates.len())
            .map(|i| candidates.get(i).id().clone())
            .collect();
        let newcomer = mean_score_of_staying(&old, &ids);
        let mut by_weight: HashMap<u32, usize> = HashMap::new();
        let mut classes: Vec<Class> = Vec::new();
        let mut class_of = vec![usize::MAX; ids.len()];
        let mut total = 0i128;
        for (index, id) in ids.iter().enumerate() {
            let weight = candidates.get(index).weight();
            if weight == 0 {
                continue;
            }
            total += i128::from(weight);
            let class = *by_weight.entry(weight).or_insert_with(|| {
                classes.push(Class {
                    weight: i128::from(weight),
                    heap: BinaryHeap::new(),
                });
                classes.len() - 1
            });
            class_of[index] = class;
            let base = old.get(id).copied().unwrap_or(newcomer);
            classes[class].heap.push(Entry { base, index });
        }
        drop(old);
        self.credit = vec![0.0; ids.len()];
        self.ids = ids;
        self.classes = classes;
        self.class_of = class_of;
        self.tick = 0;
        self.total = total;
        self.version = candidates.version();
    }

    /// The class whose head has the highest score (lower index on ties).
    fn leading_class(&self) -> Option<usize> {
        let mut best: Option<(usize, i128, usize)> = None;
        for (class, members) in self.classes.iter().enumerate() {
            let Some(head) = members.heap.peek() else {
                continue;
            };
            let score = head.base + members.weight * self.tick;
            let better = best
                .is_none_or(|(_, top, index)| score > top || (score == top && head.index < index));
            if better {
                best = Some((class, score, head.index));
            }
        }
        best.map(|(class, _, _)| class)
    }

    /// The next instance in the rotation that may be picked now.
    pub(super) fn pick(&mut self, candidates: &Candidates<'_>) -> Option<usize> {
        self.tick += 1;
        for _ in 0..SKIPS {
            let class = self.leading_class()?;
            let index = {
                let mut head = self.classes[class].heap.peek_mut()?;
                head.base -= self.total;
                head.index
            };
            if candidates.is_selectable(index) && self.takes_turn(candidates, index) {
                return Some(index);
            }
        }
        self.pick_by_scan(candidates)
    }

    /// Whether the instance at `index`, whose turn it is, takes it: always unless it is
    /// warming, then when its earned credit reaches one turn.
    fn takes_turn(&mut self, candidates: &Candidates<'_>, index: usize) -> bool {
        if !candidates.warming(index) {
            return true;
        }
        let registered = candidates.get(index).weight().max(1);
        let credit = &mut self.credit[index];
        *credit += candidates.weight(index) as f32 / registered as f32;
        if *credit >= 1.0 {
            *credit -= 1.0;
            true
        } else {
            false
        }
    }

    /// The selectable instance with the highest score, found by a scan (O(n)), charged
    /// its turn: for the rare pick where many turns in a row could not be taken.
    fn pick_by_scan(&mut self, candidates: &Candidates<'_>) -> Option<usize> {
        let scores = self.scores();
        let index = (0..self.ids.len())
            .filter(|&i| self.class_of[i] != usize::MAX && candidates.is_selectable(i))
            .max_by(|&a, &b| scores[a].cmp(&scores[b]).then_with(|| b.cmp(&a)))?;
        let class = &mut self.classes[self.class_of[index]];
        let mut entries = std::mem::take(&mut class.heap).into_vec();
        for entry in entries.iter_mut().filter(|e| e.index == index) {
            entry.base -= self.total;
        }
        class.heap = BinaryHeap::from(entries);
        Some(index)
    }
}

/// The score a new instance enters the rotation with: the mean of the instances that
/// stay (0 when none does), as nginx's new peer enters at 0 among scores that sum to 0.
/// Turns charged to an instance left out (closing, ejected) lower every score alike,
/// without bound; a newcomer entering at 0 would stand far above the rest and take
/// every turn until it caught up.
fn mean_score_of_staying(old: &HashMap<&InstanceId, i128>, ids: &[InstanceId]) -> i128 {
    let staying: Vec<i128> = ids.iter().filter_map(|id| old.get(id).copied()).collect();
    match i128::try_from(staying.len()) {
        Ok(count) if count > 0 => staying.iter().sum::<i128>() / count,
        _ => 0,
    }
}
