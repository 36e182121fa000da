//! What must hold after every run, checked on the ledger alone:
//!
//! 1. **every call is answered**, once — unless its own consumer was killed meanwhile;
//! 2. **a call fails only because of a hard fault it met**: it was in flight when a
//!    provider was killed, paused or partitioned, or began within [`DETECTION_BOUND`] of
//!    the moment its consumer could begin to notice it (the fault's start, or a later
//!    start of the consumer or news of the host from its watch during the fault: see 7).
//!    A graceful stop, an offline, a registry outage fail nothing;
//! 3. **no call runs twice** (the echo is not idempotent: nothing may re-send a call
//!    that reached a handler);
//! 4. **every graceful stop reports clean** (`ShutdownReport::forced()` is false), and
//!    so does the drain of every generation that handed over to the next (an upgrade);
//! 5. **directories converge**: when the run ends, every consumer's directory holds
//!    exactly the providers serving then (every event has ended by then);
//! 6. **every process starts**;
//! 7. **a paused host gets no new call** once the consumers had [`DETECTION_BOUND`]
//!    to notice (from the pause, or from a consumer's start or its watch's news of the
//!    host during it — a new instance has no latency to be late against; after a slow
//!    link to that host, 4 × its answers' time then, the framework's rule): a call made later in the pause and answered by that host (after it
//!    resumed) waited out the pause — the latency users are paged for, though the call
//!    succeeds;
//! 8. **a consumer told "closing" sends no new call there**: once a consumer had an
//!    answer from a provider that had begun a graceful stop or an offline (every such
//!    answer carries the closing mark), none of its later calls runs on that provider
//!    until the stop or offline ends — the mark, not the registry, is what moves
//!    consumers first (and the only thing that does for one cut off from the registry);
//! 9. **every upgrade takes over**: its next generation serves, the old one drained —
//!    unless the registry had no leader meanwhile (the new generation cannot register;
//!    the old one serves on).
//!
//! To add an invariant: a function from the schedule and the entries to violations,
//! called from [`check`].

use std::fmt;
use std::time::Duration;

use crate::ledger::{CallEnd, Entries};
use crate::schedule::{Kind, Schedule, Target};

/// How long after a provider's host is killed or paused a consumer may still send it
/// new calls: a call is overdue after 4 × the instance's latency estimate (50 ms at
/// least), and the instance is out of the picks from then on (`docs/cluster.md`,
/// "Peers that misbehave"; measured in the lab at 7–22 ms). 500 ms leaves room for
/// watch delays and a slow first estimate; a consumer that keeps sending to a paused
/// host (stall detection off) goes on for its keep-alive interval, 20 s.
pub const DETECTION_BOUND: Duration = Duration::from_millis(500);

/// The name of invariant 7.
pub const LATE_CALLS: &str = "a paused host gets no new call";

/// How long a registry call may take before it fails as unreachable (the registry
/// client's bound, 3 s), and a margin.
const REGISTRY_CALL_BOUND: Duration = Duration::from_secs(4);

/// The name of invariant 9.
pub const UPGRADES_TAKE_OVER: &str = "every upgrade takes over";

/// The name of invariant 8.
pub const TOLD_CLOSING: &str = "a consumer told closing sends no new call there";

/// A broken invariant.
#[derive(Clone, Debug)]
pub struct Violation {
    /// Which invariant.
    pub invariant: &'static str,
    /// What happened, with the call or host it concerns.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// Every invariant's violations in `entries`.
/// `providers` are the providers' addresses, all serving when the run ends.
pub fn check(schedule: &Schedule, entries: &Entries, providers: &[String]) -> Vec<Violation> {
    let mut violations = Vec::new();
    calls_end_as_allowed(schedule, entries, providers, &mut violations);
    no_call_runs_twice(entries, &mut violations);
    graceful_stops_are_clean(schedule, entries, &mut violations);
    paused_hosts_get_no_new_calls(schedule, entries, providers, &mut violations);
    told_closing_sends_no_new_calls(schedule, entries, providers, &mut violations);
    directories_converge(entries, providers, &mut violations);
    for (host, error) in &entries.start_failures {
        violations.push(Violation {
            invariant: "every process starts",
            detail: format!("{host}: {error}"),
        });
    }
    violations
}

/// Invariants 1 and 2.
fn calls_end_as_allowed(
    schedule: &Schedule,
    entries: &Entries,
    providers: &[String],
    violations: &mut Vec<Violation>,
) {
    for (id, call) in &entries.calls {
        let consumer_killed_during = |end: Duration| {
            schedule.events.iter().any(|event| {
                event.kind == Kind::ConsumerKill
                    && event.target == Target::Consumer(call.consumer)
                    && event.at >= call.started
                    && event.at <= end
            })
        };
        match &call.ended {
            None if consumer_killed_during(schedule.end()) => {}
            None => violations.push(Violation {
                invariant: "every call is answered",
                detail: format!("call {id} made at {:?} never ended", call.started),
            }),
            Some((_, CallEnd::Answered(_))) => {}
            Some((ended, CallEnd::Failed(code, message))) => {
                let excused = consumer_killed_during(*ended)
                    || schedule.events.iter().any(|event| {
                        let Target::Provider(index) = event.target else {
                            return false;
                        };
                        let address = &providers[index];
                        event.kind.is_hard()
                            && event.at <= *ended
                            && call.started
                                <= noticed_from(
                                    event,
                                    call.consumer,
                                    address,
                                    call.started,
                                    entries,
                                ) + DETECTION_BOUND
                    });
                if !excused {
                    violations.push(Violation {
                        invariant: "a call fails only at a hard fault",
                        detail: format!(
                            "call {id} made at {:?} failed at {ended:?}: {code:?} {message}; executed by {:?}",
                            call.started,
                            entries.executions.get(id).map(|runs| runs.iter().map(|run| &run.provider).collect::<Vec<_>>()),
                        ),
                    });
                }
            }
        }
    }
}

/// Invariant 7.
fn paused_hosts_get_no_new_calls(
    schedule: &Schedule,
    entries: &Entries,
    providers: &[String],
    violations: &mut Vec<Violation>,
) {
    for pause in schedule
        .events
        .iter()
        .filter(|event| event.kind == Kind::Pause)
    {
        let host = pause.target.host();
        let Target::Provider(index) = pause.target else {
            continue;
        };
        let address = &providers[index];
        let bound = DETECTION_BOUND.max(4 * slow_link_answer(schedule, pause));
        for (id, call) in &entries.calls {
            let noticed =
                noticed_from(pause, call.consumer, address, call.started, entries) + bound;
            let sent_to_it = matches!(&call.ended, Some((_, CallEnd::Answered(by))) if *by == host);
            if sent_to_it && call.started > noticed && call.started < pause.end() {
                violations.push(Violation {
                    invariant: LATE_CALLS,
                    detail: format!(
                        "call {id} made at {:?}, {:?} into the pause of {host}, waited for it: answered at {:?}",
                        call.started,
                        call.started - pause.at,
                        call.ended.as_ref().map_or(Duration::ZERO, |(at, _)| *at),
                    ),
                });
            }
        }
    }
}

/// When `consumer` could begin to notice `fault` of the provider at `address`, for a
/// call it made at `call_started`: the fault's start, or later if the consumer started
/// during the fault (it has had the bound from its start), or if its watch delivered the
/// host's registration (again) during it before the call — an instance new to a
/// consumer, or back from a closing mark, has no recent latency to be late against.
fn noticed_from(
    fault: &crate::schedule::Event,
    consumer: usize,
    address: &str,
    call_started: Duration,
    entries: &Entries,
) -> Duration {
    let during = |at: Duration| at > fault.at && at < fault.end();
    let started = entries
        .consumer_starts
        .iter()
        .filter(|(started_consumer, at)| *started_consumer == consumer && during(*at))
        .map(|(_, at)| *at);
    let consumer_host = crate::schedule::consumer_host(consumer);
    let listed = entries
        .arrivals
        .iter()
        .filter(|arrival| arrival.host == consumer_host && arrival.authority == address)
        .map(|arrival| arrival.at)
        .filter(|at| during(*at) && *at <= call_started);
    started.chain(listed).fold(fault.at, Duration::max)
}

/// How long an answer of `pause`'s host took over a slow link that ended within the
/// consumers' latency memory before the pause (zero without one): a call is overdue
/// after 4 × its instance's latency estimate, a peak EWMA that forgets over
/// `ewma_decay` (10 s), so after a slow spell the consumers take that much longer to
/// notice a pause (docs/cluster.md, "Stalled instances").
fn slow_link_answer(schedule: &Schedule, pause: &crate::schedule::Event) -> Duration {
    schedule
        .events
        .iter()
        .filter(|event| event.target == pause.target && event.end() <= pause.at)
        .filter(|event| pause.at - event.end() < EWMA_DECAY)
        .filter_map(|event| match event.kind {
            // Both ways, and the echo's work (at most 20 ms).
            Kind::LinkDelay { delay } => Some(2 * delay + Duration::from_millis(20)),
            _ => None,
        })
        .max()
        .unwrap_or_default()
}

/// The consumers' `ewma_decay` (its default).
const EWMA_DECAY: Duration = Duration::from_secs(10);

/// Invariant 8.
fn told_closing_sends_no_new_calls(
    schedule: &Schedule,
    entries: &Entries,
    providers: &[String],
    violations: &mut Vec<Violation>,
) {
    let provider_addresses: std::collections::HashMap<String, &String> = providers
        .iter()
        .enumerate()
        .map(|(index, address)| (crate::schedule::provider_host(index), address))
        .collect();
    // Each graceful stop from its step 1 to its end, each offline from when it took
    // effect to the online.
    let stops = entries
        .stops
        .iter()
        .map(|stop| (&stop.provider, stop.began, stop.at, "stop"));
    let offlines = entries
        .offlines
        .iter()
        .map(|(host, from, until)| (host, *from, until.unwrap_or(schedule.end()), "offline"));
    for (host, from, until, what) in stops.chain(offlines) {
        // Each consumer's first marked answer from this provider: one whose handler
        // began there once the stop or offline had begun (so its response carried the
        // mark; the time the answer arrived says nothing of that behind a slow link).
        let mut told = std::collections::BTreeMap::new();
        for (id, call) in &entries.calls {
            let ran_once_marking = entries.executions.get(id).is_some_and(|runs| {
                runs.iter()
                    .any(|run| run.provider == *host && run.at >= from && run.at < until)
            });
            if let Some((ended, CallEnd::Answered(by))) = &call.ended
                && by == host
                && ran_once_marking
                && *ended < until
            {
                let first = told.entry(call.consumer).or_insert(*ended);
                *first = (*first).min(*ended);
            }
        }
        for (id, call) in &entries.calls {
            let Some(told_at) = told.get(&call.consumer).copied() else {
                continue;
            };
            // A registration of the address that reached the consumer after the mark
            // is news of it the mark could not cover (the registry said it serves).
            let consumer_host = crate::schedule::consumer_host(call.consumer);
            let address = provider_addresses.get(host.as_str()).copied();
            let registered_since = entries.arrivals.iter().any(|arrival| {
                arrival.host == consumer_host
                    && Some(&arrival.authority) == address
                    && arrival.at > told_at
                    && arrival.at <= call.started
            });
            // A consumer restarted since remembers nothing.
            let restarted = schedule.events.iter().any(|restart| {
                restart.kind == Kind::ConsumerKill
                    && restart.target == Target::Consumer(call.consumer)
                    && restart.at < call.started
                    && restart.end() > told_at
            });
            let ran_there = entries.executions.get(id).is_some_and(|runs| {
                runs.iter()
                    .any(|run| run.provider == *host && run.at < until)
            });
            if call.started > told_at && ran_there && !restarted && !registered_since {
                violations.push(Violation {
                    invariant: TOLD_CLOSING,
                    detail: format!(
                        "call {id} of consumer-{consumer} made at {:?} ran on {host}, which had answered consumer-{consumer} with the closing mark at {told_at:?} ({what} from {from:?})",
                        call.started,
                        consumer = call.consumer
                    ),
                });
            }
        }
    }
}

/// Invariant 3.
fn no_call_runs_twice(entries: &Entries, violations: &mut Vec<Violation>) {
    for (id, runs) in &entries.executions {
        if runs.len() > 1 {
            violations.push(Violation {
                invariant: "no call runs twice",
                detail: format!("call {id} ran {} times: {runs:?}", runs.len()),
            });
        }
    }
}

/// Invariant 4, and 9 (every upgrade takes over, unless the registry had no leader
/// while the new generation registered: it cannot register then, and the old one
/// serves on).
fn graceful_stops_are_clean(
    schedule: &Schedule,
    entries: &Entries,
    violations: &mut Vec<Violation>,
) {
    let stops = entries.stops.iter().chain(&entries.drains);
    for stop in stops.filter(|stop| stop.forced) {
        violations.push(Violation {
            invariant: "every graceful stop reports clean",
            detail: format!("{} at {:?}: {}", stop.provider, stop.at, stop.report),
        });
    }
    for (host, at, report) in &entries.upgrade_failures {
        let leaderless = schedule.events.iter().any(|event| {
            event.kind == Kind::RegistryLeaderLoss
                && event.at <= *at
                && *at <= event.end() + REGISTRY_CALL_BOUND
        });
        if leaderless {
            continue;
        }
        violations.push(Violation {
            invariant: UPGRADES_TAKE_OVER,
            detail: format!("{host}: {report}"),
        });
    }
}

/// Invariant 5: every provider serves at the end (each event has ended).
fn directories_converge(entries: &Entries, providers: &[String], violations: &mut Vec<Violation>) {
    let mut expected = providers.to_vec();
    expected.sort();
    for (consumer, addresses) in &entries.directories {
        let mut found = addresses.clone();
        found.sort();
        if found != expected {
            violations.push(Violation {
                invariant: "directories converge",
                detail: format!("consumer-{consumer} holds {found:?}, serving: {expected:?}"),
            });
        }
    }
}
