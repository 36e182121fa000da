//! The latest traced call of each bucket of a duration histogram: OpenMetrics'
//! exemplars, which take a reader from a latency bucket to one trace that landed in it.
//!
//! A histogram's slots are allocated at its first traced observation. Writing one is a
//! `try_lock` and a copy: when two calls end in the same bucket at once, one of them is
//! not kept, which an exemplar (a sample, not a count) does not need.

use std::sync::OnceLock;

use parking_lot::Mutex;

/// One call's place in its trace and its duration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallExemplar {
    /// The trace the call belongs to (128 bits, never zero).
    pub trace_id: u128,
    /// The call's span in it (64 bits, never zero).
    pub span_id: u64,
    /// The call's duration, in seconds.
    pub seconds: f64,
}

/// The latest [`CallExemplar`] of each of `BUCKETS` buckets.
#[derive(Debug, Default)]
pub(super) struct BucketExemplars<const BUCKETS: usize> {
    slots: OnceLock<Box<[Mutex<Option<CallExemplar>>; BUCKETS]>>,
}

impl<const BUCKETS: usize> BucketExemplars<BUCKETS> {
    /// Keeps `exemplar` as bucket `bucket`'s latest (unless another call is being kept
    /// there this instant).
    pub(super) fn record(&self, bucket: usize, exemplar: CallExemplar) {
        let slots = self
            .slots
            .get_or_init(|| Box::new(std::array::from_fn(|_| Mutex::new(None))));
        if let Some(mut slot) = slots.get(bucket).and_then(Mutex::try_lock) {
            *slot = Some(exemplar);
        }
    }

    /// Every bucket's latest exemplar, in bucket order (none before the first).
    pub(super) fn snapshot(&self) -> Vec<Option<CallExemplar>> {
        match self.slots.get() {
            Some(slots) => slots.iter().map(|slot| *slot.lock()).collect(),
            None => vec![None; BUCKETS],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bucket_keeps_its_latest_call() {
        let exemplars = BucketExemplars::<3>::default();
        assert_eq!(exemplars.snapshot(), [None; 3]);
        let call = |trace_id, seconds| CallExemplar {
            trace_id,
            span_id: 7,
            seconds,
        };
        exemplars.record(1, call(1, 0.5));
        exemplars.record(1, call(2, 0.6));
        exemplars.record(2, call(3, 2.0));
        exemplars.record(9, call(4, 9.0)); // no such bucket: ignored
        assert_eq!(
            exemplars.snapshot(),
            [None, Some(call(2, 0.6)), Some(call(3, 2.0))]
        );
    }
}
