//! The health of one instance as this consumer sees it: the state the blacklist's
//! ejection policy writes and every pick reads.
//!
//! Kept apart from the policy ([`Blacklist`](crate::Blacklist)) because it is stored in
//! each [`Invoker`](crate::Invoker): the invoker holds the state, the blacklist decides
//! when it changes. The transitions are the ones gRPC A50 / Envoy outlier detection and
//! linkerd's failure accrual use: healthy → ejected (until a time) → one probe →
//! healthy again or ejected for longer; and, apart from failures, *closing* for a while
//! once the instance said it is going offline, and *suspected* while a call's answer is
//! overdue and the PING that checks its connection is out (`call/dispatch.rs`).
//!
//! A healthy instance — nearly every instance nearly all the time — costs a pick one
//! atomic load: the state behind the lock is read only while something is flagged.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use parking_lot::Mutex;
use tokio::time::Instant;

/// Whether an instance may be picked now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Healthy.
    Ready,
    /// Its ejection has ended and no probe is under way: this pick is the probe.
    Probe,
    /// Ejected, closing, suspected or being probed, until about `until`.
    Unavailable {
        /// When it may become selectable again.
        until: Instant,
    },
}

/// The health of one instance as this consumer sees it.
#[derive(Debug, Default)]
pub(crate) struct InstanceHealth {
    /// Fast path: false means healthy, nothing to check under the lock.
    flagged: AtomicBool,
    /// The current streak of connection-level failures.
    consecutive_failures: AtomicU32,
    state: Mutex<HealthState>,
}

#[derive(Debug, Default)]
struct HealthState {
    ejected_until: Option<Instant>,
    ejections: u32,
    healthy_since: Option<Instant>,
    probing: bool,
    closing_until: Option<Instant>,
    /// Overdue calls whose connection's PING is out, and when the last of them asked
    /// expects its answer at the latest.
    suspicions: u32,
    suspected_until: Option<Instant>,
}

/// What the ejection policy reads before deciding to eject an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EjectionRecord {
    /// Whether the instance is ejected now.
    pub(crate) ejected: bool,
    /// Whether a probe is under way (a failure now is the probe's).
    pub(crate) probing: bool,
    /// How many times it was ejected (before any decay for healthy time).
    pub(crate) ejections: u32,
    /// Since when it has been healthy after its last ejection, if it was ever restored.
    pub(crate) healthy_since: Option<Instant>,
}

impl InstanceHealth {
    /// Whether the instance may be picked at `now`; clears marks that have expired.
    pub(crate) fn availability(&self, now: Instant) -> Availability {
        if !self.is_flagged() {
            return Availability::Ready;
        }
        let mut state = self.state.lock();
        if state.suspicions > 0
            && let Some(until) = state.suspected_until
        {
            return Availability::Unavailable { until };
        }
        if let Some(until) = state.closing_until {
            if until > now {
                return Availability::Unavailable { until };
            }
            state.closing_until = None;
        }
        if let Some(until) = state.ejected_until {
            if until > now {
                return Availability::Unavailable { until };
            }
            if state.probing {
                return Availability::Unavailable { until: now };
            }
            return Availability::Probe;
        }
        self.flagged.store(false, Ordering::Release);
        Availability::Ready
    }

    /// Claims the probe of an instance whose ejection ended; false if another call has it.
    pub(crate) fn begin_probe(&self, now: Instant) -> bool {
        let mut state = self.state.lock();
        match state.ejected_until {
            Some(until) if until <= now && !state.probing => {
                state.probing = true;
                true
            }
            _ => false,
        }
    }

    /// Whether the instance is marked closing at `now`.
    pub(crate) fn is_closing(&self, now: Instant) -> bool {
        self.is_flagged() && self.state.lock().closing_until.is_some_and(|u| u > now)
    }

    /// Whether the instance is ejected at `now`.
    pub(crate) fn ejected(&self, now: Instant) -> bool {
        self.is_flagged() && self.state.lock().ejected_until.is_some_and(|u| u > now)
    }

    /// Suspects the instance until the suspicion is lifted (one per overdue call);
    /// `until` is when its PING must have been answered, for panic mode's order.
    pub(crate) fn suspect(&self, until: Instant) {
        let mut state = self.state.lock();
        state.suspicions += 1;
        state.suspected_until = Some(state.suspected_until.map_or(until, |u| u.max(until)));
        self.flagged.store(true, Ordering::Release);
    }

    /// Lifts one suspicion of [`InstanceHealth::suspect`].
    pub(crate) fn unsuspect(&self) {
        let mut state = self.state.lock();
        state.suspicions = state.suspicions.saturating_sub(1);
        if state.suspicions == 0 {
            state.suspected_until = None;
        }
    }

    /// Whether an overdue call's PING is out now.
    pub(crate) fn is_suspected(&self) -> bool {
        self.is_flagged() && self.state.lock().suspicions > 0
    }

    /// Whether anything (ejection, probe, closing mark) may be recorded: false means
    /// healthy, and is read without the lock.
    pub(crate) fn is_flagged(&self) -> bool {
        self.flagged.load(Ordering::Acquire)
    }

    /// Records a success: ends the failure streak and, if this was the instance's probe,
    /// its ejection. True when the instance was restored by it.
    pub(crate) fn record_success(&self, now: Instant) -> bool {
        // Most successes follow successes: no write and no lock when nothing changes.
        if self.consecutive_failures.load(Ordering::Relaxed) != 0 {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
        if !self.is_flagged() {
            return false;
        }
        let mut state = self.state.lock();
        if !state.probing {
            return false;
        }
        state.probing = false;
        state.ejected_until = None;
        state.healthy_since = Some(now);
        true
    }

    /// Records a connection-level failure; returns the length of the streak it extends.
    pub(crate) fn record_failure(&self) -> u32 {
        self.consecutive_failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1)
    }

    /// What the ejection policy needs to know, at `now`.
    pub(crate) fn ejection_record(&self, now: Instant) -> EjectionRecord {
        let state = self.state.lock();
        EjectionRecord {
            ejected: state.ejected_until.is_some_and(|until| until > now),
            probing: state.probing,
            ejections: state.ejections,
            healthy_since: state.healthy_since,
        }
    }

    /// Ejects the instance until `until`, as its `ejections`-th ejection; ends a probe
    /// under way. False (and nothing changed) when it is already ejected at `now`: a
    /// concurrent failure got there first.
    pub(crate) fn eject(&self, now: Instant, until: Instant, ejections: u32) -> bool {
        let mut state = self.state.lock();
        if state.ejected_until.is_some_and(|current| current > now) {
            return false;
        }
        state.ejections = ejections;
        state.probing = false;
        state.ejected_until = Some(until);
        state.healthy_since = None;
        self.flagged.store(true, Ordering::Release);
        true
    }

    /// Lifts the closing mark, if any: the registry listed the instance anew since (a
    /// manual online writes a changed registration); true if there was one.
    pub(crate) fn clear_closing(&self) -> bool {
        self.state.lock().closing_until.take().is_some()
    }

    /// Marks the instance closing until `until`; false when it already was at `now`.
    pub(crate) fn mark_closing(&self, now: Instant, until: Instant) -> bool {
        let mut state = self.state.lock();
        if state.closing_until.is_some_and(|current| current > now) {
            return false;
        }
        state.closing_until = Some(until);
        self.flagged.store(true, Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_ejection_ends_with_one_probe_and_a_success_restores() {
        let health = InstanceHealth::default();
        let now = Instant::now();
        assert_eq!(health.availability(now), Availability::Ready);
        assert!(health.eject(now, now + Duration::from_secs(30), 1));
        assert!(
            !health.eject(now, now + Duration::from_secs(60), 2),
            "already ejected"
        );
        assert!(health.ejected(now));
        let later = now + Duration::from_secs(30);
        assert_eq!(health.availability(later), Availability::Probe);
        assert!(health.begin_probe(later));
        assert!(!health.begin_probe(later), "one probe at a time");
        assert!(health.record_success(later));
        assert_eq!(health.availability(later), Availability::Ready);
        assert_eq!(health.ejection_record(later).healthy_since, Some(later));
    }

    #[tokio::test(start_paused = true)]
    async fn a_suspected_instance_is_unavailable_until_every_suspicion_is_lifted() {
        let health = InstanceHealth::default();
        let now = Instant::now();
        let until = now + Duration::from_secs(1);
        health.suspect(until);
        health.suspect(now + Duration::from_millis(500));
        assert_eq!(
            health.availability(now),
            Availability::Unavailable { until }
        );
        health.unsuspect();
        assert!(health.is_suspected());
        health.unsuspect();
        assert!(!health.is_suspected());
        assert_eq!(health.availability(now), Availability::Ready);
        assert!(!health.is_flagged());
    }

    #[tokio::test(start_paused = true)]
    async fn a_closing_mark_expires_by_itself() {
        let health = InstanceHealth::default();
        let now = Instant::now();
        let until = now + Duration::from_secs(30);
        assert!(health.mark_closing(now, until));
        assert!(!health.mark_closing(now, until), "marked once");
        assert!(health.is_closing(now));
        assert_eq!(
            health.availability(now),
            Availability::Unavailable { until }
        );
        assert_eq!(health.availability(until), Availability::Ready);
        assert!(!health.is_flagged());
    }
}
