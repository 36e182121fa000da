//! The blacklist: outlier ejection of instances that fail at the connection level, and
//! the non-failure *closing* state of instances that said they are going offline.
//!
//! Rules (gRPC A50 / Envoy outlier detection, linkerd failure accrual):
//! - `consecutive_failures` connection-level failures in a row (refused, reset,
//!   UNAVAILABLE, timeout) eject an instance; application errors never count;
//! - the n-th ejection lasts `base_ejection_time × n` (capped at `max_ejection_time`)
//!   plus up to `jitter` of it; n decreases by one for every base ejection time an
//!   instance stays healthy;
//! - at most `max_ejection_percent` of the instances are ejected at once (one always may);
//! - expiry is checked on every pick; the first pick after expiry is a *probe*, the only
//!   call the instance gets until it answers: success restores it, failure ejects it
//!   again for longer;
//! - when nothing is selectable, the pick goes to the instance whose ejection or closing
//!   ends soonest (panic mode) rather than failing every call.
//!
//! This file is the policy only. The state it writes is each instance's
//! `InstanceHealth` (`health.rs`), stored in the instance's invoker; unlike one
//! framework we studied, that state is read on every pick.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::RngExt;
use rand::rngs::SmallRng;
use tokio::time::Instant;

use crate::config::BlacklistConfig;
use crate::health::EjectionRecord;
use crate::invoker::Invoker;

/// Counts of what the blacklist did, for a stats accessor (metrics come later).
#[derive(Debug, Default)]
pub struct BlacklistStats {
    ejections: AtomicU64,
    unresponsive: AtomicU64,
    recoveries: AtomicU64,
    closing_marks: AtomicU64,
    panic_picks: AtomicU64,
}

/// A copy of [`BlacklistStats`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlacklistCounts {
    /// Instances ejected (each ejection, including re-ejection after a failed probe).
    pub ejections: u64,
    /// Ejections because a connection to the instance did not answer a PING (a host
    /// that vanished, a paused process): also counted in `ejections`.
    pub unresponsive: u64,
    /// Ejected instances restored by a successful probe.
    pub recoveries: u64,
    /// Times an instance was marked closing (closing header, rejection, GOAWAY).
    pub closing_marks: u64,
    /// Picks made in panic mode (nothing was selectable).
    pub panic_picks: u64,
}

impl std::ops::AddAssign for BlacklistCounts {
    /// Adds `other`'s counts to these.
    fn add_assign(&mut self, other: Self) {
        self.ejections += other.ejections;
        self.unresponsive += other.unresponsive;
        self.recoveries += other.recoveries;
        self.closing_marks += other.closing_marks;
        self.panic_picks += other.panic_picks;
    }
}

impl BlacklistStats {
    /// The counts now.
    pub fn counts(&self) -> BlacklistCounts {
        BlacklistCounts {
            ejections: self.ejections.load(Ordering::Relaxed),
            unresponsive: self.unresponsive.load(Ordering::Relaxed),
            recoveries: self.recoveries.load(Ordering::Relaxed),
            closing_marks: self.closing_marks.load(Ordering::Relaxed),
            panic_picks: self.panic_picks.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn note_panic_pick(&self) {
        self.panic_picks.fetch_add(1, Ordering::Relaxed);
    }
}

/// The ejection policy of one reference.
#[derive(Debug)]
pub struct Blacklist {
    config: BlacklistConfig,
    closing_expire: Duration,
    stats: Arc<BlacklistStats>,
}

impl Blacklist {
    /// A policy with `config`; `closing_expire` is how long a closing mark lasts
    /// (`closing_invoker_expire_time`).
    pub fn new(config: BlacklistConfig, closing_expire: Duration) -> Self {
        Self {
            config,
            closing_expire,
            stats: Arc::default(),
        }
    }

    /// What the blacklist did so far.
    pub fn stats(&self) -> &Arc<BlacklistStats> {
        &self.stats
    }

    /// A call on `invoker` succeeded (or failed with an application error).
    pub(crate) fn on_success(&self, invoker: &Invoker, now: Instant) {
        if invoker.health().record_success(now) {
            self.stats.recoveries.fetch_add(1, Ordering::Relaxed);
            tracing::info!(instance = %invoker.id(), "instance recovered: probe succeeded");
        }
    }

    /// A call on `invoker` failed at the connection level (refused, reset, UNAVAILABLE,
    /// timeout). `peers` is the directory's current list, for `max_ejection_percent`;
    /// `rng` (the call's) draws the ejection's jitter.
    pub(crate) fn on_failure(
        &self,
        invoker: &Invoker,
        peers: &[Arc<Invoker>],
        now: Instant,
        rng: &mut SmallRng,
    ) {
        if !self.config.enabled {
            return;
        }
        let health = invoker.health();
        let streak = health.record_failure() >= self.config.consecutive_failures.max(1);
        if !streak && !health.is_flagged() {
            return;
        }
        let record = health.ejection_record(now);
        let failed_probe = record.probing;
        if record.ejected || !(failed_probe || streak) {
            return;
        }
        // The peers are counted with no lock of this instance's held: counting reads
        // their health, and two instances failing at once must not wait for each other.
        if !failed_probe && !self.may_eject(invoker, peers, now) {
            return;
        }
        let reason = if failed_probe {
            "probe failed"
        } else {
            "consecutive failures"
        };
        self.eject(invoker, record, now, rng, reason);
    }

    /// `invoker` did not answer at all (`reason`: the PING of an overdue call, or a
    /// dial within the connect timeout): the instance is ejected at once (within
    /// `max_ejection_percent`), without waiting for a streak of failures — its calls
    /// are failing anyway, and a new connection to a host that vanished would only hang
    /// until the connect timeout.
    pub(crate) fn on_unresponsive(
        &self,
        invoker: &Invoker,
        peers: &[Arc<Invoker>],
        now: Instant,
        rng: &mut SmallRng,
        reason: &'static str,
    ) {
        if !self.config.enabled {
            return;
        }
        let record = invoker.health().ejection_record(now);
        if record.ejected || !(record.probing || self.may_eject(invoker, peers, now)) {
            return;
        }
        if self.eject(invoker, record, now, rng, reason) {
            self.stats.unresponsive.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ejects `invoker` for its next ejection time; false when a concurrent failure
    /// ejected it first.
    fn eject(
        &self,
        invoker: &Invoker,
        record: EjectionRecord,
        now: Instant,
        rng: &mut SmallRng,
        reason: &'static str,
    ) -> bool {
        let ejections = self.decayed(record, now).saturating_add(1);
        let duration = self.ejection_time(ejections, rng);
        if !invoker.health().eject(now, later(now, duration), ejections) {
            return false;
        }
        self.stats.ejections.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            instance = %invoker.id(),
            ejection_ms = duration.as_millis() as u64,
            times = ejections,
            reason,
            "instance ejected"
        );
        true
    }

    /// The instance said it is going offline: stop picking it, and every other
    /// registration of its address in `peers`, without counting a failure. The mark is
    /// the word of the process listening at that address: a crashed process's entry
    /// outlives it until its lease or session expires, and while it does, the entry
    /// reaches the process that took the address over — the one now closing.
    pub(crate) fn mark_closing(&self, invoker: &Invoker, peers: &[Arc<Invoker>], now: Instant) {
        let until = later(now, self.closing_expire);
        if !invoker.health().mark_closing(now, until) {
            return;
        }
        self.stats.closing_marks.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(instance = %invoker.id(), "instance is closing: no longer picked");
        let same_address = peers
            .iter()
            .filter(|peer| peer.authority() == invoker.authority() && peer.id() != invoker.id());
        for peer in same_address {
            if peer.health().mark_closing(now, until) {
                self.stats.closing_marks.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(instance = %peer.id(), "same address closing: no longer picked");
            }
        }
    }

    fn may_eject(&self, invoker: &Invoker, peers: &[Arc<Invoker>], now: Instant) -> bool {
        let total = peers.len().max(1);
        let limit = (total * self.config.max_ejection_percent as usize / 100).max(1);
        let ejected = peers
            .iter()
            .filter(|peer| peer.id() != invoker.id() && peer.health().ejected(now))
            .count();
        ejected < limit
    }

    /// The instance's ejection count, less one for every base ejection time it has
    /// stayed healthy since it was last restored.
    fn decayed(&self, record: EjectionRecord, now: Instant) -> u32 {
        let Some(since) = record.healthy_since else {
            return record.ejections;
        };
        let base = self.config.base_ejection_time.as_nanos().max(1);
        let healthy_periods = now.saturating_duration_since(since).as_nanos() / base;
        record
            .ejections
            .saturating_sub(u32::try_from(healthy_periods).unwrap_or(u32::MAX))
    }

    /// How long the `ejections`-th ejection lasts: `base × ejections`, capped, plus a
    /// random part of up to `jitter` of it.
    fn ejection_time(&self, ejections: u32, rng: &mut SmallRng) -> Duration {
        let base = self.config.base_ejection_time.saturating_mul(ejections);
        let capped = base.min(self.config.max_ejection_time);
        let jitter = self.config.jitter.clamp(0.0, 1.0) * rng.random::<f64>();
        let extra = Duration::try_from_secs_f64(capped.as_secs_f64() * jitter).unwrap_or_default();
        capped.saturating_add(extra)
    }
}

/// The time `by` after `now`; about a century ahead if the clock cannot hold that (a
/// configured duration that large means "for good").
fn later(now: Instant, by: Duration) -> Instant {
    now.checked_add(by)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests;
