//! The lifecycle with tokio's paused clock: every step's end condition and bound, the
//! report, the phase sequence, callbacks and the interrupt.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::test_registry::TestRegistry;
use super::*;
use rpc_core::RegistryError;
use rpc_core::ServiceKey;

fn config() -> ShutdownConfig {
    ShutdownConfig {
        internal_signal: false,
        ..ShutdownConfig::default()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A provider: one listener on a free loopback port serving `t.S` (answers every request
/// with an empty response), and no registry.
fn provider_plan() -> StartPlan {
    let service = tower::util::BoxCloneSyncService::new(tower::service_fn(
        |_req: http::Request<hyper::body::Incoming>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        },
    ));
    StartPlan {
        exports: vec![Export {
            listener: None,
            bind: "127.0.0.1:0".parse().unwrap(),
            advertise_host: None,
            options: Default::default(),
            service,
            services: vec![ExportedService::new(ServiceKey::new("t.S"))],
        }],
        ..StartPlan::default()
    }
}

/// A started provider (see [`provider_plan`]).
async fn started(config: ShutdownConfig) -> Lifecycle {
    let lifecycle = Lifecycle::new("test", config);
    lifecycle.start(provider_plan()).await.unwrap();
    lifecycle
}

fn outcome(report: &ShutdownReport, step: Step) -> (Duration, StepOutcome) {
    let line = report.step(step).unwrap();
    (line.duration, line.outcome)
}

#[tokio::test(start_paused = true)]
async fn an_idle_application_passes_every_phase_in_order_in_one_window() {
    let lifecycle = started(config()).await;
    assert_eq!(lifecycle.phase(), Phase::Serving);
    let report = lifecycle.before_shutdown().await;
    let phases: Vec<Phase> = lifecycle
        .phase_history()
        .into_iter()
        .map(|(phase, _)| phase)
        .collect();
    assert_eq!(
        phases,
        [
            Phase::Created,
            Phase::Starting,
            Phase::Serving,
            Phase::Unregistering,
            Phase::WaitingForConsumers,
            Phase::Rejecting,
            Phase::DrainingInbound,
            Phase::DrainingOutbound,
            Phase::Destroying,
            Phase::Callbacks,
            Phase::Stopped
        ]
    );
    assert_eq!(*lifecycle.watch_phase().borrow(), Phase::Stopped);
    let steps: Vec<Step> = report.steps.iter().map(|s| s.step).collect();
    assert_eq!(
        steps,
        [
            Step::Unregister,
            Step::WaitForConsumers,
            Step::RejectNew,
            Step::DrainInbound,
            Step::DrainOutbound,
            Step::DestroyProtocols,
            Step::Callbacks
        ]
    );
    // Only the offline window is waited: no fixed sleep anywhere.
    assert_eq!(report.total, ms(500));
    assert_eq!(
        outcome(&report, Step::WaitForConsumers),
        (ms(500), StepOutcome::Completed)
    );
    assert_eq!(report.exit_code(), 0);
}

/// Issue 15: an application that exports no service has no consumer to wait for, so
/// step 2 is skipped (and reported so) instead of waiting one offline window.
#[tokio::test(start_paused = true)]
async fn a_consumer_only_application_skips_waiting_for_consumers() {
    let lifecycle = Lifecycle::new("test", config());
    lifecycle.start(StartPlan::default()).await.unwrap();
    let report = lifecycle.before_shutdown().await;
    assert_eq!(
        outcome(&report, Step::WaitForConsumers),
        (ms(0), StepOutcome::Skipped)
    );
    assert_eq!(report.total, ms(0));
    assert_eq!(report.exit_code(), 0, "skipping is not forcing");
    assert!(
        report
            .to_string()
            .contains("wait-for-consumers=0ms (skipped)"),
        "{report}"
    );
}

#[tokio::test(start_paused = true)]
async fn waiting_for_consumers_extends_while_requests_arrive_up_to_its_bound() {
    let lifecycle = started(config()).await;
    let clock = lifecycle.request_clock().clone();
    // A request every 100 ms for 1.2 s, then silence.
    let traffic = tokio::spawn(async move {
        for _ in 0..12 {
            clock.touch();
            tokio::time::sleep(ms(100)).await;
        }
    });
    let report = lifecycle.before_shutdown().await;
    traffic.await.unwrap();
    // Last request at 1.1 s; quiet for 500 ms after it.
    assert_eq!(
        outcome(&report, Step::WaitForConsumers),
        (ms(1_600), StepOutcome::Completed)
    );

    let lifecycle = started(config()).await;
    let clock = lifecycle.request_clock().clone();
    let endless = tokio::spawn(async move {
        loop {
            clock.touch();
            tokio::time::sleep(ms(100)).await;
        }
    });
    let report = lifecycle.before_shutdown().await;
    endless.abort();
    assert_eq!(
        outcome(&report, Step::WaitForConsumers),
        (ms(3_000), StepOutcome::TimedOut)
    );
    assert_eq!(
        report.exit_code(),
        0,
        "a full wait loses nothing: later requests are rejected safely"
    );
}

#[tokio::test(start_paused = true)]
async fn drains_end_when_the_counters_reach_zero_or_at_the_step_bound() {
    let lifecycle = started(config()).await;
    let inbound = lifecycle.inbound().acquire();
    let outbound = lifecycle.outbound().acquire();
    let release = tokio::spawn(async move {
        tokio::time::sleep(ms(1_200)).await;
        drop(inbound);
        tokio::time::sleep(ms(300)).await;
        drop(outbound);
    });
    let report = lifecycle.before_shutdown().await;
    release.await.unwrap();
    // Window ends at 0.5 s; inbound drains at 1.2 s; outbound at 1.5 s.
    assert_eq!(
        outcome(&report, Step::DrainInbound),
        (ms(700), StepOutcome::Completed)
    );
    assert_eq!(
        outcome(&report, Step::DrainOutbound),
        (ms(300), StepOutcome::Completed)
    );
    assert_eq!(report.exit_code(), 0);

    let lifecycle = started(config()).await;
    let _stuck_in = lifecycle.inbound().acquire();
    let _stuck_out = lifecycle.outbound().acquire();
    let report = lifecycle.before_shutdown().await;
    assert_eq!(
        outcome(&report, Step::DrainInbound),
        (ms(3_000), StepOutcome::TimedOut)
    );
    assert_eq!(
        outcome(&report, Step::DrainOutbound),
        (ms(3_000), StepOutcome::TimedOut)
    );
    assert_eq!((report.inbound_left, report.outbound_left), (1, 1));
    assert!(report.forced());
    assert_eq!(report.exit_code(), 1);
}

/// Issue 12, rule 1: a drain that reaches its bound loses nothing yet. A request still
/// in flight then that ends during step 6 was not cut: the stop is clean.
#[tokio::test(start_paused = true)]
async fn a_request_that_ends_during_step_six_is_not_forced() {
    let lifecycle = started(config()).await;
    let inbound = lifecycle.inbound().acquire();
    let release = tokio::spawn(async move {
        // The window ends at 0.5 s, the drain's bound at 3.5 s; this ends at 4 s.
        tokio::time::sleep(ms(4_000)).await;
        drop(inbound);
    });
    let report = lifecycle.before_shutdown().await;
    release.await.unwrap();
    assert_eq!(
        outcome(&report, Step::DrainInbound),
        (ms(3_000), StepOutcome::TimedOut)
    );
    assert_eq!(outcome(&report, Step::DestroyProtocols).0, ms(500));
    assert_eq!(report.inbound_left, 0);
    assert!(!report.forced(), "{report}");
    assert_eq!(report.exit_code(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_whole_sequence_is_bounded_by_timeout() {
    let lifecycle = started(ShutdownConfig {
        timeout: ms(2_000),
        ..config()
    })
    .await;
    let _stuck = lifecycle.inbound().acquire();
    let report = lifecycle.before_shutdown().await;
    assert_eq!(report.total, ms(2_000));
    assert_eq!(
        outcome(&report, Step::DrainInbound),
        (ms(1_500), StepOutcome::TimedOut)
    );
    assert_eq!(report.exit_code(), 1);
}

#[tokio::test(start_paused = true)]
async fn callbacks_run_once_in_order_bounded_and_a_panic_is_contained() {
    let lifecycle = started(ShutdownConfig {
        timeout: ms(5_000),
        ..config()
    })
    .await;
    let order = Arc::new(Mutex::new(Vec::new()));
    for n in 0..3 {
        let order = order.clone();
        lifecycle.on_shutdown(move || async move {
            order.lock().push(n);
            if n == 1 {
                panic!("callback 1 fails");
            }
        });
    }
    let slow_ran = Arc::new(AtomicUsize::new(0));
    let slow = slow_ran.clone();
    lifecycle.on_shutdown(move || async move {
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        slow.fetch_add(1, Ordering::SeqCst);
    });
    let (first, second) = tokio::join!(lifecycle.before_shutdown(), lifecycle.before_shutdown());
    assert_eq!(first, second, "both callers see the same single run");
    let again = lifecycle.before_shutdown().await;
    assert_eq!(again, first);
    assert_eq!(
        *order.lock(),
        [0, 1, 2],
        "in order, each once, the panic did not stop the rest"
    );
    assert_eq!(slow_ran.load(Ordering::SeqCst), 0);
    assert_eq!(first.callbacks_failed, 2, "the panic and the slow one");
    // Step 2 ended after one quiet offline window (500 ms); the callbacks had the time
    // an unset callback_timeout keeps of a 5 s timeout, half of it.
    assert_eq!(
        first.total,
        ms(500 + 2_500),
        "the slow callback was cut at the callbacks' time"
    );
    assert_eq!(first.exit_code(), 1);
}

/// `timeout` 4 s, of which `callback_timeout` 1 s.
fn four_seconds_one_for_callbacks() -> ShutdownConfig {
    ShutdownConfig {
        timeout: ms(4_000),
        callback_timeout: Some(ms(1_000)),
        ..config()
    }
}

/// Issue 25, point 6: `timeout: 5s` with `callback_timeout` unset (kitex's and
/// pingora's default shutdown) keeps half of it for a registered callback: steps 1 to 6
/// end by 2.5 s, and the callback runs within the other 2.5 s.
#[tokio::test(start_paused = true)]
async fn an_unset_callback_timeout_keeps_half_of_a_short_timeout() {
    let lifecycle = started(ShutdownConfig {
        timeout: ms(5_000),
        step_timeout: ms(10_000),
        ..config()
    })
    .await;
    let _stuck = lifecycle.inbound().acquire();
    let ran = Arc::new(Mutex::new(None));
    let at = ran.clone();
    lifecycle.on_shutdown(move || async move {
        *at.lock() = Some(Instant::now());
    });
    let started_at = Instant::now();
    let report = lifecycle.before_shutdown().await;
    assert_eq!(
        *ran.lock(),
        Some(started_at + ms(2_500)),
        "steps 1 to 6 ended by timeout - timeout / 2"
    );
    assert_eq!(outcome(&report, Step::Callbacks).1, StepOutcome::Completed);
    assert_eq!(report.total, ms(2_500));
}

/// Issue 12, rule 8: the drains use every bound (a request that never ends) and
/// would leave no time for callbacks; `callback_timeout` is kept for them out of
/// `timeout`, so each one runs, bounded, and one that hangs takes only its share.
#[tokio::test(start_paused = true)]
async fn callbacks_run_even_when_the_drains_use_the_whole_timeout() {
    let lifecycle = started(four_seconds_one_for_callbacks()).await;
    let _stuck = lifecycle.inbound().acquire();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let hung = ran.clone();
    lifecycle.on_shutdown(move || async move {
        hung.lock().push(("hangs", Instant::now()));
        std::future::pending::<()>().await;
    });
    let after = ran.clone();
    lifecycle.on_shutdown(move || async move {
        after.lock().push(("flushes", Instant::now()));
    });
    let started_at = Instant::now();
    let report = lifecycle.before_shutdown().await;
    // Steps 1 to 6 end by timeout - callback_timeout = 3 s; step 7 has the rest.
    let callbacks_began = started_at + ms(3_000);
    // The hung one had half of the second, then the second ran at once.
    assert_eq!(
        outcome(&report, Step::Callbacks),
        (ms(500), StepOutcome::TimedOut)
    );
    assert_eq!(report.total, ms(3_500));
    assert_eq!(
        *ran.lock(),
        [
            ("hangs", callbacks_began),
            ("flushes", callbacks_began + ms(500)),
        ],
        "every callback ran, in order"
    );
    assert_eq!(report.callbacks_failed, 1, "the one that hung");
    assert_eq!(report.exit_code(), 1);
}

/// Without a callback, nothing is kept: the steps have the whole `timeout`.
#[tokio::test(start_paused = true)]
async fn no_time_is_kept_when_no_callback_is_registered() {
    let lifecycle = started(four_seconds_one_for_callbacks()).await;
    let _stuck = lifecycle.inbound().acquire();
    let report = lifecycle.before_shutdown().await;
    assert_eq!(
        outcome(&report, Step::DrainInbound),
        (ms(3_000), StepOutcome::TimedOut)
    );
    assert_eq!(report.total, ms(4_000));
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_skips_the_remaining_waits_and_callbacks() {
    let lifecycle = started(config()).await;
    let _stuck = lifecycle.inbound().acquire();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    lifecycle.on_shutdown(move || async move {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let shutdown = tokio::spawn(lifecycle.before_shutdown());
    tokio::time::sleep(ms(1_000)).await;
    assert_eq!(lifecycle.phase(), Phase::DrainingInbound);
    let before = Instant::now();
    lifecycle.interrupt(Interrupt::Sigterm);
    let report = shutdown.await.unwrap();
    assert_eq!(
        before.elapsed(),
        Duration::ZERO,
        "nothing more was waited for"
    );
    assert_eq!(outcome(&report, Step::DrainInbound).1, StepOutcome::Skipped);
    assert_eq!(outcome(&report, Step::Callbacks).1, StepOutcome::Skipped);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(report.interrupted_by, Some(Interrupt::Sigterm));
    assert_eq!(report.exit_code(), 143);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_registry_cannot_hold_up_unregistering() {
    // Its withdrawals never answer (a network partition).
    let registry = Arc::new(TestRegistry::holding_withdrawals(Arc::new(
        tokio::sync::Semaphore::new(0),
    )));
    let lifecycle = Lifecycle::new("test", config());
    let plan = StartPlan {
        registries: vec![registry.clone()],
        ..provider_plan()
    };
    lifecycle.start(plan).await.unwrap();
    assert_eq!(registry.events(), ["register t.S"]);
    assert_eq!(lifecycle.registrations().len(), 1);
    let report = lifecycle.before_shutdown().await;
    assert_eq!(
        outcome(&report, Step::Unregister),
        (ms(3_000), StepOutcome::TimedOut)
    );
    assert_eq!(
        report.unregister_failures, 1,
        "cut by the bound: the registration will expire"
    );
}

#[tokio::test(start_paused = true)]
async fn start_twice_is_an_error() {
    let lifecycle = started(config()).await;
    assert!(matches!(
        lifecycle.start(StartPlan::default()).await,
        Err(StartError::AlreadyStarted(_))
    ));
}

/// A reference whose provider never appears.
struct NeverReady(ServiceKey);

#[async_trait]
impl ManagedReference for NeverReady {
    fn service(&self) -> &ServiceKey {
        &self.0
    }
    async fn subscribe(&self) -> Result<(), RegistryError> {
        Ok(())
    }
    async fn wait_for_provider(&self) {
        std::future::pending().await
    }
    async fn close(&self) {}
}

#[tokio::test(start_paused = true)]
async fn shutdown_during_start_up_interrupts_it_at_once() {
    let lifecycle = Lifecycle::new("test", config());
    let plan = StartPlan {
        references: vec![(Arc::new(NeverReady(ServiceKey::new("t.S"))), true)],
        check_timeout: Duration::from_secs(3_600),
        ..StartPlan::default()
    };
    let starting = tokio::spawn({
        let lifecycle = lifecycle.clone();
        async move { lifecycle.start(plan).await }
    });
    tokio::time::sleep(ms(1_000)).await;
    assert_eq!(lifecycle.phase(), Phase::Starting);
    let asked = Instant::now();
    let report = lifecycle.before_shutdown().await;
    assert!(matches!(
        starting.await.unwrap(),
        Err(StartError::Interrupted)
    ));
    assert_eq!(
        asked.elapsed(),
        Duration::ZERO,
        "no wait for the check to time out"
    );
    assert_eq!(lifecycle.phase(), Phase::Stopped);
    assert_eq!(report.exit_code(), 0);
    assert!(
        report.steps.is_empty(),
        "nothing was serving, so no step ran"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_of_a_lifecycle_never_started_returns_at_once() {
    let lifecycle = Lifecycle::new("test", config());
    let report = lifecycle.before_shutdown().await;
    assert!(report.steps.is_empty());
    assert_eq!(lifecycle.phase(), Phase::Stopped);
}

/// What the composition root hands step 6 (the admin endpoint) is closed there, while
/// the phase is `destroying`, after the drains; a failed or aborted start-up closes it
/// too.
#[tokio::test(start_paused = true)]
async fn step_6_closes_what_it_was_handed_and_so_does_an_abort() {
    let lifecycle = started(config()).await;
    let closed_in = Arc::new(Mutex::new(None));
    {
        let closed_in = closed_in.clone();
        let phases = lifecycle.watch_phase();
        lifecycle.close_in_step_6(move || async move {
            *closed_in.lock() = Some(*phases.borrow());
        });
    }
    assert_eq!(*closed_in.lock(), None);
    lifecycle.before_shutdown().await;
    assert_eq!(*closed_in.lock(), Some(Phase::Destroying));

    let lifecycle = Lifecycle::new("test", config());
    let closed = Arc::new(AtomicUsize::new(0));
    {
        let closed = closed.clone();
        lifecycle.close_in_step_6(move || async move {
            closed.fetch_add(1, Ordering::SeqCst);
        });
    }
    let mut plan = StartPlan::default();
    plan.references
        .push((Arc::new(NeverReady(ServiceKey::new("a.B"))), true));
    plan.check_timeout = ms(100);
    assert!(lifecycle.start(plan).await.is_err());
    assert_eq!(closed.load(Ordering::SeqCst), 1, "start-up undone");
    lifecycle.abort().await;
    assert_eq!(closed.load(Ordering::SeqCst), 1, "at most once");
}
