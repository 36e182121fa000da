//! The body of each shutdown step, as a function over the parts it needs and nothing
//! else. Each waits only as long as its condition needs, and at most to its bound; the
//! order is `run_shutdown` in `mod.rs`. Steps 6 and 7 also serve the hot upgrade's old
//! process (`upgrade/retire.rs`), which closes and calls back the same way.

use std::sync::atomic::{AtomicUsize, Ordering};

use rpc_core::{InflightCounter, RequestClock};
use tokio::time::Instant;
use tonic_health::ServingStatus;

use super::shutdown_report::ShutdownReport;
use crate::bounds::SequenceBounds;
use crate::callbacks::Callbacks;
use crate::config::ShutdownConfig;
use crate::counters::RequestCounters;
use crate::health_service::HealthStatus;
use crate::protocols::{Protocols, close_connections};
use crate::registrations::{Registrations, unregister_each};
use crate::step::StepOutcome;

/// Step 1: health NOT_SERVING, then every registration withdrawn in parallel. A
/// manual offline or online under way ends first; later ones are refused (the phase
/// has moved).
pub(super) async fn unregister(
    registrations: &Registrations,
    health: &HealthStatus,
    bounds: &SequenceBounds,
    report: &mut ShutdownReport,
) -> StepOutcome {
    let bound = bounds.step_end();
    let _no_traffic_change = registrations.settle(bound).await;
    health.set_all(ServingStatus::NotServing).await;
    let taken = registrations.take_all();
    let withdrawn = AtomicUsize::new(0);
    let outcome = bounds
        .wait(unregister_each(&taken, &withdrawn), bound)
        .await;
    report.unregister_failures = taken.len() - withdrawn.load(Ordering::Relaxed);
    if outcome == StepOutcome::TimedOut {
        tracing::warn!(
            pending = report.unregister_failures,
            "unregistering timed out; those registrations will expire with their session"
        );
    }
    outcome
}

/// Step 2: until one offline window without a request, at most
/// `consumer_update_wait_time`; [`StepOutcome::Skipped`] at once when the application
/// serves no listener (a consumer-only application has no consumers to wait for).
pub(super) async fn wait_for_consumers(
    protocols: &Protocols,
    requests: &RequestClock,
    config: &ShutdownConfig,
    bounds: &SequenceBounds,
) -> StepOutcome {
    if !protocols.serves() {
        tracing::info!("no service exported: no consumer to wait for, step skipped");
        return StepOutcome::Skipped;
    }
    let start = Instant::now();
    let window = config.offline_request_window_timeout;
    let bound = bounds.bound(config.consumer_update_wait_time);
    // A client that reads no closing mark would keep sending until the bound, and be
    // refused in step 3: a call it sends after one offline window sends its connection
    // the first GOAWAY, and the connection it dials again is held back until it calls
    // elsewhere. Not at once: within the window, a client that follows the registry
    // (a Dubbo consumer) is still hearing of the unregistration, and moves by itself —
    // some (Dubbo's Python SDK) cannot take a GOAWAY at all.
    let plain_clients_go = async {
        tokio::time::sleep_until(start + window).await;
        for server in protocols.servers() {
            server.goaway_plain_clients_that_call();
        }
        std::future::pending::<()>().await
    };
    // Counted from the start of this step: an idle provider still serves for one
    // window after unregistering, for consumers that picked it just before.
    let quiet = async {
        loop {
            let last = requests.last().map_or(start, |last| last.max(start));
            let quiet_until = last + window;
            if Instant::now() >= quiet_until {
                return;
            }
            tokio::time::sleep_until(quiet_until).await;
        }
    };
    let quiet_or_bound = async {
        tokio::select! {
            () = quiet => {}
            () = plain_clients_go => {}
        }
    };
    bounds.wait(quiet_or_bound, bound).await
}

/// Step 3: refusals begin (entering
/// [`lossless_rpc_core::Phase::Rejecting`](rpc_core::Phase::Rejecting), done by the
/// sequence runner, is what the provider filter reads on every request), and every
/// connection of a plain client gets its first GOAWAY, so that it opens no new stream
/// to be refused.
pub(super) async fn reject_new(protocols: &Protocols) -> StepOutcome {
    for server in protocols.servers() {
        server.goaway_plain_clients();
    }
    StepOutcome::Completed
}

/// Steps 4 and 5: until `counter` reaches zero, at most `step_timeout`. A request
/// still in flight at the bound is not lost yet: it may end during step 6.
pub(super) async fn drain(counter: &InflightCounter, bounds: &SequenceBounds) -> StepOutcome {
    bounds.wait(counter.wait_idle(), bounds.step_end()).await
}

/// Step 6: listeners and connections (the GOAWAY exchange, bounded by
/// `step_timeout`), then references and registries, then what the composition root
/// handed over (the admin endpoint, which answered probes until now). What had not
/// finished by then was lost, and is counted: inbound requests left, streams cut,
/// connections closed by force with calls on them, outbound calls cancelled with
/// their references.
pub(super) async fn destroy_protocols(
    protocols: &Protocols,
    counters: &RequestCounters,
    bounds: &SequenceBounds,
    report: &mut ShutdownReport,
) -> StepOutcome {
    let opened = protocols.take();
    let tally = close_connections(&opened.servers, &counters.inbound, bounds).await;
    report.count_connections(tally);
    report.inbound_left = counters.inbound.current();
    report.outbound_left = counters.outbound.current();
    let outcome = bounds.wait(opened.release(), bounds.step_end()).await;
    let cut_short = report.connections_forced > 0
        || report.streams_cut > 0
        || report.inbound_left > 0
        || report.outbound_left > 0;
    if cut_short && outcome == StepOutcome::Completed {
        StepOutcome::TimedOut
    } else {
        outcome
    }
}

/// Step 7: the application's callbacks, within `callback_timeout` (kept for them out
/// of `timeout`, so they run even after the drains used their bounds), unless a
/// second signal skipped them.
pub(crate) async fn run_callbacks(
    callbacks: &Callbacks,
    bounds: &SequenceBounds,
    report: &mut ShutdownReport,
) -> StepOutcome {
    if bounds.interrupted() {
        let skipped = callbacks.discard();
        if skipped > 0 {
            tracing::warn!(skipped, "second signal: shutdown callbacks skipped");
        }
        return StepOutcome::Skipped;
    }
    report.callbacks_failed = callbacks.run_all(bounds.callbacks_end()).await;
    if report.callbacks_failed > 0 {
        StepOutcome::TimedOut
    } else {
        StepOutcome::Completed
    }
}
