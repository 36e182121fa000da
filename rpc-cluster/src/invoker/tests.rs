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
pub(crate) fn weighted_in(n: usize, weight: u32, settings: Arc<InvokerSettings>) -> Arc<Invoker> {
    let mut instance =
        Instance::new(ServiceKey::new("t.S"), "127.0.0.1", 10000 + n as u16).with_weight(weight);
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
