//! One instance as this consumer sees it: its address, its lazily-created channel, its
//! load (calls in flight, latency estimate) and its health.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use rpc_core::{Instance, InstanceId};
use rpc_transport::{ChannelOptions, InstanceConnection, connect_lazy};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::active_index::{ActiveIndex, ActiveSlot};
use crate::ewma::PeakEwma;
use crate::fleet_latency::FleetLatency;
use crate::health::{Availability, InstanceHealth};

/// Settings every invoker of a directory shares.
#[derive(Debug)]
pub(crate) struct InvokerSettings {
    pub(crate) channel: ChannelOptions,
    pub(crate) default_rtt: Duration,
    pub(crate) ewma_decay: Duration,
    /// The latency all instances of the directory answer with (see `ewma.rs`).
    pub(crate) fleet: Arc<FleetLatency>,
    /// When a call's answer is overdue; `None`: never (stall detection off).
    pub(crate) stall: Option<StallBound>,
}

/// When a call's answer is overdue on an instance: after `factor` times the instance's
/// latency estimate, and never before `floor`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StallBound {
    pub(crate) factor: u32,
    pub(crate) floor: Duration,
}

/// One provider instance seen by one reference.
///
/// Nothing network-related exists until the instance is first picked: a directory can
/// hold many thousands of known instances cheaply.
#[derive(Debug)]
pub struct Invoker {
    id: InstanceId,
    authority: String,
    instance: ArcSwap<Instance>,
    weight: AtomicU32,
    first_seen: Instant,
    settings: Arc<InvokerSettings>,
    channel: OnceLock<Option<InstanceConnection>>,
    active: AtomicUsize,
    /// Where changes of `active` are reported, once a least-active pick indexed the
    /// list this invoker is in (see `active_index.rs`).
    active_slot: ArcSwapOption<ActiveSlot>,
    /// Woken when the last call in flight ends on a removed invoker.
    idle: Notify,
    ewma: PeakEwma,
    health: InstanceHealth,
    removed: AtomicBool,
    destroyed: CancellationToken,
    dispatched: AtomicU64,
    sent: AtomicU64,
    failures: AtomicU64,
    /// Times as nanoseconds after `first_seen`, plus one; 0 means "never".
    last_dispatch: AtomicU64,
    last_sent: AtomicU64,
    failing_since: AtomicU64,
    /// Calls sent and not answered yet (no response head), and the sum of their start
    /// times (µs after `first_seen`): the age of what the instance has not answered.
    unanswered: AtomicU64,
    unanswered_since_us: AtomicU64,
}

impl Invoker {
    pub(crate) fn new(instance: Instance, settings: Arc<InvokerSettings>, now: Instant) -> Self {
        Self {
            id: instance.id.clone(),
            authority: instance.authority(),
            weight: AtomicU32::new(instance.weight),
            instance: ArcSwap::from_pointee(instance),
            first_seen: now,
            ewma: PeakEwma::in_fleet(
                settings.default_rtt,
                settings.ewma_decay,
                now,
                settings.fleet.clone(),
            ),
            settings,
            channel: OnceLock::new(),
            active: AtomicUsize::new(0),
            active_slot: ArcSwapOption::empty(),
            idle: Notify::new(),
            health: InstanceHealth::default(),
            removed: AtomicBool::new(false),
            destroyed: CancellationToken::new(),
            dispatched: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            last_dispatch: AtomicU64::new(0),
            last_sent: AtomicU64::new(0),
            failing_since: AtomicU64::new(0),
            unanswered: AtomicU64::new(0),
            unanswered_since_us: AtomicU64::new(0),
        }
    }

    /// The instance id.
    pub fn id(&self) -> &InstanceId {
        &self.id
    }

    /// `host:port`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The instance as last registered.
    pub fn instance(&self) -> Arc<Instance> {
        self.instance.load_full()
    }

    /// The registered weight.
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// When this consumer first saw the instance (warm-up counts from here).
    pub fn first_seen(&self) -> Instant {
        self.first_seen
    }

    /// Calls in flight from this consumer to this instance.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether a channel has been created (the instance was picked at least once).
    pub fn is_connected(&self) -> bool {
        self.channel.get().is_some()
    }

    /// Whether the registry no longer lists the instance.
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// P2C load in nanoseconds: `(in-flight + waiting + 1) × latency`, where the latency
    /// is the peak-EWMA estimate or, when larger, the mean age of the calls the instance
    /// has not answered yet (Finagle's and linkerd's point: what an endpoint owes counts
    /// as it ages, so an instance that stopped answering looks slower with every
    /// millisecond, not only once a call times out). Calls waiting for a stream at the
    /// instance's stream limit count twice: in flight, and again as the queue a new
    /// call would join, so an instance with room is preferred to one that is full.
    pub fn load(&self, now: Instant) -> f64 {
        let latency = self.ewma.estimate_ns(now).max(self.unanswered_age_ns(now));
        let waiting = match self.channel.get() {
            Some(Some(channel)) => channel.waiting_for_streams(),
            _ => 0,
        };
        (self.active() as f64 + waiting as f64 + 1.0) * latency
    }

    /// The mean age of the calls sent and not answered yet, in nanoseconds (0 if none).
    fn unanswered_age_ns(&self, now: Instant) -> f64 {
        let count = self.unanswered.load(Ordering::Relaxed);
        if count == 0 {
            return 0.0;
        }
        let since = self.unanswered_since_us.load(Ordering::Relaxed) as f64 / count as f64;
        let now_us = now.saturating_duration_since(self.first_seen).as_micros() as f64;
        (now_us - since).max(0.0) * 1e3
    }

    /// Counts the call of `stamp` as unanswered until the guard is dropped (its
    /// response head arrived, or it ended without one).
    pub(crate) fn await_answer(self: &Arc<Self>, stamp: DispatchStamp) -> Unanswered {
        let since_us = stamp.0 / 1_000;
        self.unanswered_since_us
            .fetch_add(since_us, Ordering::Relaxed);
        self.unanswered.fetch_add(1, Ordering::Relaxed);
        Unanswered {
            invoker: self.clone(),
            since_us,
        }
    }

    /// When a call sent at `started` is overdue, if stall detection is on: after
    /// `stall_factor` × the latency estimate, never before `stall_floor`. An estimate
    /// that holds a failure's penalty says nothing of how fast the instance answers (and
    /// would put the bound seconds away just when the instance is suspect), so the
    /// fleet's latency stands in for it then. `None` too while neither the instance nor
    /// the fleet has answered a call: with no latency known, nothing is overdue (a burst
    /// of slow first calls is not a stall).
    pub(crate) fn overdue_at(&self, started: Instant) -> Option<Instant> {
        let stall = self.settings.stall?;
        let fleet = &self.settings.fleet;
        let answered = match self.ewma.answered_ns() {
            Some(answered) => answered,
            None if fleet.answers() > 0 => fleet.ns(),
            None => return None,
        };
        let estimate = Duration::from_nanos(answered as u64);
        Some(started + estimate.saturating_mul(stall.factor).max(stall.floor))
    }

    /// Suspects the instance while an overdue call's connection is checked: no call
    /// picks it until the guard is dropped.
    pub(crate) fn suspect(self: &Arc<Self>, now: Instant) -> Suspicion {
        self.health
            .suspect(now + self.settings.channel.probe_timeout);
        Suspicion {
            invoker: self.clone(),
        }
    }

    /// The peak-EWMA latency estimate at `now` (what P2C weighs): the directory's
    /// `default_rtt` until a call was observed, then decayed for the time since the
    /// last observation (see `ewma.rs`). For observers such as the admin status page.
    pub fn latency_estimate(&self, now: Instant) -> Duration {
        Duration::from_nanos(self.ewma.estimate_ns(now) as u64)
    }

    /// Whether the instance may be picked now (ejected, closing, due for its probe).
    pub fn availability(&self, now: Instant) -> Availability {
        self.health.availability(now)
    }

    /// Whether the instance told this consumer it is going offline (closing mark,
    /// "closing, not executed" rejection, or GOAWAY), within the closing expiry time.
    pub fn is_closing(&self, now: Instant) -> bool {
        self.health.is_closing(now)
    }

    /// Whether a call's answer is overdue on the instance and the PING that checks its
    /// connection is out: no call picks it meanwhile.
    pub fn is_suspected(&self) -> bool {
        self.health.is_suspected()
    }

    /// Whether the blacklist has ejected the instance until a time after `now` (an
    /// instance whose ejection ended and awaits its probe is not ejected any more).
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.health.ejected(now)
    }

    pub(crate) fn health(&self) -> &InstanceHealth {
        &self.health
    }

    /// Takes `instance`'s registration (weight, metadata) if it differs from the one
    /// held; whether it did. Compared before cloning: a registry event at 10 000
    /// instances leaves nearly all of them unchanged.
    pub(crate) fn update(&self, instance: &Instance) -> bool {
        if **self.instance.load() == *instance {
            return false;
        }
        self.weight.store(instance.weight, Ordering::Relaxed);
        self.instance.store(Arc::new(instance.clone()));
        true
    }

    /// The connection to this instance, created on first use; `None` after the invoker
    /// was destroyed or when the address is not a valid `host:port`.
    pub(crate) fn channel(&self) -> Option<InstanceConnection> {
        if self.destroyed.is_cancelled() {
            return None;
        }
        self.channel
            .get_or_init(
                || match connect_lazy(&self.authority, &self.settings.channel) {
                    Ok(channel) => Some(channel),
                    Err(error) => {
                        tracing::warn!(instance = %self.id, %error, "cannot connect to this instance");
                        None
                    }
                },
            )
            .clone()
    }

    pub(crate) fn start_call(self: &Arc<Self>) -> ActiveCall {
        self.active.fetch_add(1, Ordering::SeqCst);
        self.report_active();
        ActiveCall {
            invoker: self.clone(),
        }
    }

    /// From now on reports this invoker's calls in flight to `index` at `position`,
    /// starting with the current count.
    pub(crate) fn watch_active(&self, index: &Arc<ActiveIndex>, position: usize) {
        self.active_slot.store(Some(Arc::new(ActiveSlot {
            index: index.clone(),
            position,
        })));
        index.refresh(position, &self.active);
    }

    fn report_active(&self) {
        if let Some(slot) = self.active_slot.load().as_deref() {
            slot.index.refresh(slot.position, &self.active);
        }
    }

    /// Records the latency of an answer (into the fleet's latency too).
    pub(crate) fn observe_latency(&self, rtt: Duration, now: Instant) {
        self.ewma.observe(rtt, now);
    }

    /// Records a failure as `penalty` latency (not into the fleet's latency: a failure
    /// says nothing about how fast instances answer).
    pub(crate) fn observe_penalty(&self, penalty: Duration, now: Instant) {
        self.ewma.observe_penalty(penalty, now);
    }

    pub(crate) fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// Resolves when no call is in flight (at once if none is). Only meaningful after
    /// [`Invoker::mark_removed`], which makes the last call's end wake waiters.
    pub(crate) async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.active.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Cancels calls still in flight and refuses new ones; the connection closes when
    /// the last reference to the channel is dropped.
    pub(crate) fn destroy(&self) {
        self.destroyed.cancel();
    }

    pub(crate) fn destroyed(&self) -> &CancellationToken {
        &self.destroyed
    }
}

mod guards;
mod tally;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use guards::{ActiveCall, Suspicion, Unanswered};
pub(crate) use tally::DispatchStamp;
pub use tally::InvokerStats;
