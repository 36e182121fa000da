//! Counters of what a reference's cluster did.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::blacklist::BlacklistCounts;
use crate::classify::FailureKind;

/// Live counters of one reference.
#[derive(Debug, Default)]
pub(crate) struct ClusterStats {
    calls: AtomicU64,
    /// By the kind of failure that led to the retry ([`FailureKind::index`]).
    retries: [AtomicU64; FailureKind::ALL.len()],
    reroutes: AtomicU64,
    budget_exhausted: AtomicU64,
    no_provider: AtomicU64,
    waited_for_provider: AtomicU64,
    swallowed: AtomicU64,
}

/// A copy of a reference's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterCounts {
    /// Calls made through the reference.
    pub calls: u64,
    /// Failover retries (attempts after the first that may have cost the provider work).
    pub retries: u64,
    /// The same retries by the kind of failure that led to each, indexed by
    /// [`FailureKind::index`] (see [`ClusterCounts::retries_after`]).
    pub retries_by_kind: [u64; FailureKind::ALL.len()],
    /// Requests a closing provider refused and that went to another instance.
    pub reroutes: u64,
    /// Retries not made because the retry budget was empty.
    pub budget_exhausted: u64,
    /// Calls that found no provider at all.
    pub no_provider: u64,
    /// Calls that found no instance to send to and waited for one to be listed
    /// (`wait_for_provider`); those that found none by the bound are also in
    /// `no_provider` (or failed with the refusal that sent them waiting).
    pub waited_for_provider: u64,
    /// Failures answered with an empty response (failsafe, failback).
    pub swallowed: u64,
    /// What the blacklist did.
    pub blacklist: BlacklistCounts,
}

impl std::ops::AddAssign for ClusterCounts {
    /// Adds `other`'s counts to these (two references to one service, in one scrape).
    fn add_assign(&mut self, other: Self) {
        self.calls += other.calls;
        self.retries += other.retries;
        for (mine, theirs) in self.retries_by_kind.iter_mut().zip(other.retries_by_kind) {
            *mine += theirs;
        }
        self.reroutes += other.reroutes;
        self.budget_exhausted += other.budget_exhausted;
        self.no_provider += other.no_provider;
        self.waited_for_provider += other.waited_for_provider;
        self.swallowed += other.swallowed;
        self.blacklist += other.blacklist;
    }
}

impl ClusterCounts {
    /// Retries made after a failure of `kind`.
    pub fn retries_after(&self, kind: FailureKind) -> u64 {
        self.retries_by_kind[kind.index()]
    }
}

impl ClusterStats {
    pub(crate) fn counts(&self, blacklist: BlacklistCounts) -> ClusterCounts {
        let retries_by_kind = self
            .retries
            .each_ref()
            .map(|count| count.load(Ordering::Relaxed));
        ClusterCounts {
            calls: self.calls.load(Ordering::Relaxed),
            retries: retries_by_kind.iter().sum(),
            retries_by_kind,
            reroutes: self.reroutes.load(Ordering::Relaxed),
            budget_exhausted: self.budget_exhausted.load(Ordering::Relaxed),
            no_provider: self.no_provider.load(Ordering::Relaxed),
            waited_for_provider: self.waited_for_provider.load(Ordering::Relaxed),
            swallowed: self.swallowed.load(Ordering::Relaxed),
            blacklist,
        }
    }

    pub(crate) fn note_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_retry(&self, after: FailureKind) {
        self.retries[after.index()].fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_reroute(&self) {
        self.reroutes.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_budget_exhausted(&self) {
        self.budget_exhausted.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_no_provider(&self) {
        self.no_provider.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_waited_for_provider(&self) {
        self.waited_for_provider.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn note_swallowed(&self) {
        self.swallowed.fetch_add(1, Ordering::Relaxed);
    }
}
