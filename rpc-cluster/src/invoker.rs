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

/// What one consumer sent to one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvokerStats {
    /// Attempts made (each retry is one more), whether or not they reached the
    /// instance.
    pub dispatched: u64,
    /// Attempts whose HTTP/2 stream was opened on a connection to the instance: what
    /// may have reached it (an attempt with no connection, or none before it gave up,
    /// is not counted).
    pub sent: u64,
    /// Attempts that failed at the connection level, timed out or were refused.
    pub failures: u64,
    /// When the latest attempt was made.
    pub last_dispatch: Option<Instant>,
    /// When the latest attempt counted in `sent` was made.
    pub last_sent: Option<Instant>,
    /// When the current run of failures began (cleared by a success).
    pub failing_since: Option<Instant>,
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

    /// What this consumer sent to the instance so far.
    pub fn stats(&self) -> InvokerStats {
        InvokerStats {
            dispatched: self.dispatched.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_dispatch: self.instant(&self.last_dispatch),
            last_sent: self.instant(&self.last_sent),
            failing_since: self.instant(&self.failing_since),
        }
    }

    fn stamp(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.first_seen).as_nanos() as u64 + 1
    }

    fn instant(&self, stamp: &AtomicU64) -> Option<Instant> {
        match stamp.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.first_seen + Duration::from_nanos(n - 1)),
        }
    }

    /// Counts an attempt made at `at`; its time stamp, for the attempt's other notes.
    pub(crate) fn note_dispatch(&self, at: Instant) -> DispatchStamp {
        let stamp = self.stamp(at);
        self.dispatched.fetch_add(1, Ordering::Relaxed);
        self.last_dispatch.store(stamp, Ordering::Relaxed);
        DispatchStamp(stamp)
    }

    /// The attempt of `stamp` opened its stream on a connection to the instance.
    pub(crate) fn note_sent(&self, stamp: DispatchStamp) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.last_sent.fetch_max(stamp.0, Ordering::Relaxed);
    }

    pub(crate) fn note_result(&self, failed: bool, at: Instant) {
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
            let _ = self.failing_since.compare_exchange(
                0,
                self.stamp(at),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        } else if self.failing_since.load(Ordering::Relaxed) != 0 {
            self.failing_since.store(0, Ordering::Relaxed);
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

    pub(crate) fn update(&self, instance: Instance) -> bool {
        let current = self.instance.load();
        if **current == instance {
            return false;
        }
        self.weight.store(instance.weight, Ordering::Relaxed);
        self.instance.store(Arc::new(instance));
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

/// When an attempt was made, as its invoker counts time (nanoseconds after it was
/// first seen, plus one): read from the clock once per attempt.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DispatchStamp(u64);

/// Counts one call as unanswered on an invoker until dropped.
#[derive(Debug)]
pub(crate) struct Unanswered {
    invoker: Arc<Invoker>,
    since_us: u64,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        self.invoker.unanswered.fetch_sub(1, Ordering::Relaxed);
        self.invoker
            .unanswered_since_us
            .fetch_sub(self.since_us, Ordering::Relaxed);
    }
}

/// Keeps an invoker from being picked while an overdue call's PING is out.
#[derive(Debug)]
pub(crate) struct Suspicion {
    invoker: Arc<Invoker>,
}

impl Drop for Suspicion {
    fn drop(&mut self) {
        self.invoker.health.unsuspect();
    }
}

/// Counts one call in flight on an invoker until dropped.
#[derive(Debug)]
pub(crate) struct ActiveCall {
    invoker: Arc<Invoker>,
}

/// A call is active until its response body ends (a stream until its last message).
impl rpc_core::BodyGuard for ActiveCall {}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        let before = self.invoker.active.fetch_sub(1, Ordering::SeqCst);
        self.invoker.report_active();
        if before == 1 && self.invoker.is_removed() {
            self.invoker.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rpc_core::ServiceKey;

    pub(crate) fn settings() -> Arc<InvokerSettings> {
        Arc::new(InvokerSettings {
            channel: ChannelOptions::default(),
            default_rtt: Duration::from_millis(5),
            ewma_decay: Duration::from_secs(10),
            fleet: Arc::new(FleetLatency::new(Duration::from_millis(5))),
            stall: Some(StallBound {
                factor: 4,
                floor: Duration::from_millis(50),
            }),
        })
    }

    /// An invoker on 127.0.0.1:(10000 + n) with weight 100.
    pub(crate) fn invoker(n: usize) -> Arc<Invoker> {
        weighted(n, 100)
    }

    pub(crate) fn weighted(n: usize, weight: u32) -> Arc<Invoker> {
        weighted_in(n, weight, settings())
    }

    /// Like [`weighted`], sharing `settings` (and so the fleet's latency).
    pub(crate) fn weighted_in(
        n: usize,
        weight: u32,
        settings: Arc<InvokerSettings>,
    ) -> Arc<Invoker> {
        let mut instance = Instance::new(ServiceKey::new("t.S"), "127.0.0.1", 10000 + n as u16)
            .with_weight(weight);
        instance.id = InstanceId::new(format!("i{n}"));
        Arc::new(Invoker::new(instance, settings, Instant::now()))
    }

    #[tokio::test]
    async fn no_channel_exists_before_the_first_pick() {
        let invoker = invoker(1);
        assert!(!invoker.is_connected());
        assert!(invoker.channel().is_some());
        assert!(invoker.is_connected());
        invoker.destroy();
        assert!(invoker.channel().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn active_calls_count_until_dropped() {
        let invoker = invoker(1);
        let call = invoker.start_call();
        assert_eq!(invoker.active(), 1);
        drop(call);
        assert_eq!(invoker.active(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn unanswered_calls_weigh_more_as_they_age() {
        let invoker = invoker(1);
        let start = Instant::now();
        invoker.observe_latency(Duration::from_millis(10), start);
        let waiting = invoker.await_answer(invoker.note_dispatch(start));
        let _call = invoker.start_call();
        let fresh = invoker.load(start + Duration::from_millis(5));
        let aged = invoker.load(start + Duration::from_millis(100));
        assert!(
            (fresh - 2.0 * 10e6).abs() < 1e5,
            "the estimate while young: {fresh}"
        );
        assert!(
            (aged - 2.0 * 100e6).abs() < 1e5,
            "its age once older: {aged}"
        );
        drop(waiting);
        let answered = invoker.load(start + Duration::from_millis(100));
        assert!(
            answered < 2.0 * 11e6,
            "answered: the estimate again: {answered}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_overdue_after_a_multiple_of_the_estimate_and_never_before_the_floor() {
        let invoker = invoker(1);
        let now = Instant::now();
        assert_eq!(invoker.overdue_at(now), None, "no latency known yet");
        invoker.observe_latency(Duration::from_millis(40), now);
        let overdue = invoker.overdue_at(now).unwrap() - now;
        assert!(overdue.abs_diff(Duration::from_millis(160)) < Duration::from_millis(1));
        let quick = super::tests::invoker(2);
        quick.observe_latency(Duration::from_millis(1), now);
        assert_eq!(
            quick.overdue_at(now).unwrap() - now,
            Duration::from_millis(50)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_latency_estimate_starts_at_the_default_and_jumps_to_a_peak() {
        let invoker = invoker(1);
        let now = Instant::now();
        assert_eq!(invoker.latency_estimate(now), Duration::from_millis(5));
        invoker.observe_latency(Duration::from_millis(40), now);
        let estimate = invoker.latency_estimate(now);
        assert!(
            estimate.abs_diff(Duration::from_millis(40)) < Duration::from_micros(10),
            "{estimate:?}"
        );
    }
}
