//! Cluster strategies: what to do when an attempt fails (Dubbo's `cluster`).
//!
//! A strategy is a policy, not a participant, in the shape of tower's retry `Policy`:
//! it says *where* a call's attempts go ([`Strategy::plan`]) and, after a failed
//! attempt, *whether* to try again ([`Strategy::on_failure`]), from a few facts about
//! the call ([`CallFacts`]). It reaches into nothing: the runner (`call/run.rs`) owns
//! the call, the retry budget, the stats and the failback queue, and carries the
//! decision out.
//!
//! Whatever the strategy, a request a closing provider refused ("closing, not
//! executed") goes to another instance without counting as a retry, so a caller never
//! sees a rolling deploy: the runner re-routes those before a strategy hears of a
//! failure.

mod available;
mod broadcast;
mod failback;
mod failfast;
mod failover;
mod failsafe;
mod forking;

use std::time::Duration;

use rand::rngs::SmallRng;

use crate::classify::FailureKind;
use crate::config::{ClusterKind, ReferenceConfig};

/// Where a call's attempts go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// One attempt at a time, each to the instance the load balance picks among those
    /// not tried yet in this call.
    Balanced,
    /// One attempt at a time, to the first selectable instance in the directory's order
    /// (sorted by instance id), without load balancing.
    InOrder,
    /// This many attempts at once, on different instances; the first answer wins, and
    /// if none answers the last failure goes to the caller.
    Race(usize),
    /// One attempt on every selectable instance at once; any failure fails the call.
    All,
}

/// Why the latest attempt of a call did not answer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failed {
    /// The attempt failed this way.
    Attempt(FailureKind),
    /// No attempt could be made: no instance is left to try, or the request body can no
    /// longer be sent.
    NoAttempt,
}

/// What a strategy decides after a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Try another instance after `backoff` (if the retry budget allows).
    Retry {
        /// Pause before the next attempt.
        backoff: Duration,
    },
    /// Give the failure to the caller.
    Fail,
    /// Answer the caller with an empty OK response; with `retry_later`, the call is
    /// also retried in the background (failback queue).
    Swallow {
        /// Whether the failed call is queued for background retries.
        retry_later: bool,
    },
}

/// What a strategy may know about a call when one of its attempts failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallFacts {
    /// Attempts made so far, the one that just failed included; re-routed refusals of
    /// closing providers do not count.
    pub(crate) attempts: u32,
    /// Retries the call may make: the method's or the reference's `retries`, or the
    /// caller's `rpc-retries` header.
    pub(crate) retries_allowed: u32,
    /// Whether the method may run twice safely.
    pub(crate) idempotent: bool,
    /// Whether the request can be sent again (a buffered body, or a streaming one no
    /// attempt has read).
    pub(crate) replayable: bool,
}

/// A cluster strategy. One that overrides nothing is failfast: one balanced attempt,
/// and its failure goes to the caller.
pub(crate) trait Strategy: Send + Sync + std::fmt::Debug + 'static {
    /// Where the call's attempts go. Default: [`Plan::Balanced`].
    fn plan(&self) -> Plan {
        Plan::Balanced
    }

    /// What to do after the failure `failed` of a call described by `facts`; `rng` is
    /// the call's generator, for a jittered backoff. Asked after each failure of a
    /// one-at-a-time plan ([`Plan::Balanced`], [`Plan::InOrder`]); a race or a broadcast
    /// settles its call by the rule its plan states. Default: [`Decision::Fail`].
    fn on_failure(&self, failed: Failed, facts: &CallFacts, rng: &mut SmallRng) -> Decision {
        let _ = (failed, facts, rng);
        Decision::Fail
    }

    /// Whether [`Strategy::on_failure`] can answer [`Decision::Retry`]: only then does
    /// the channel keep a retry budget, and only such a strategy's calls earn it.
    fn retries(&self) -> bool {
        false
    }
}

/// The strategy `config.cluster` names, with the settings of `config` it needs.
pub(crate) fn build(config: &ReferenceConfig) -> Box<dyn Strategy> {
    match config.cluster {
        ClusterKind::Failover => Box::new(failover::Failover::new(
            config.backoff_base,
            config.backoff_max,
        )),
        ClusterKind::Failfast => Box::new(failfast::Failfast),
        ClusterKind::Failsafe => Box::new(failsafe::Failsafe),
        ClusterKind::Failback => Box::new(failback::Failback),
        ClusterKind::Forking => Box::new(forking::Forking::new(config.forks)),
        ClusterKind::Broadcast => Box::new(broadcast::Broadcast),
        ClusterKind::Available => Box::new(available::Available),
    }
}
