//! What must hold after every run, checked on the ledger alone:
//!
//! 1. **every call is answered**, once — unless its own consumer was killed meanwhile;
//! 2. **a call fails only because of a hard fault it met**: it was in flight when a
//!    provider was killed or paused, or began within [`DETECTION_BOUND`] of it (the
//!    time the consumer may take to stop choosing that instance). A graceful stop, an
//!    offline, a registry outage fail nothing;
//! 3. **no call runs twice** (the echo is not idempotent: nothing may re-send a call
//!    that reached a handler);
//! 4. **every graceful stop reports clean** (`ShutdownReport::forced()` is false);
//! 5. **directories converge**: when the run ends, every consumer's directory holds
//!    exactly the providers serving then (every event has ended by then);
//! 6. **every process starts**;
//! 7. **a paused host gets no new call** once the consumers had [`DETECTION_BOUND`]
//!    to notice (from the pause, or from a consumer's start during it): a call made later in the pause and answered by that host (after it
//!    resumed) waited out the pause — the latency users are paged for, though the call
//!    succeeds.
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
    calls_end_as_allowed(schedule, entries, &mut violations);
    no_call_runs_twice(entries, &mut violations);
    graceful_stops_are_clean(entries, &mut violations);
    paused_hosts_get_no_new_calls(schedule, entries, &mut violations);
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
fn calls_end_as_allowed(schedule: &Schedule, entries: &Entries, violations: &mut Vec<Violation>) {
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
                        event.kind.is_hard()
                            && matches!(event.target, Target::Provider(_))
                            && event.at <= *ended
                            && call.started <= event.at + DETECTION_BOUND
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
    violations: &mut Vec<Violation>,
) {
    for pause in schedule
        .events
        .iter()
        .filter(|event| event.kind == Kind::Pause)
    {
        let host = pause.target.host();
        for (id, call) in &entries.calls {
            // A consumer started during the pause has had the bound from its start.
            let started = schedule
                .events
                .iter()
                .filter(|event| event.kind == Kind::ConsumerKill)
                .filter(|event| event.target == Target::Consumer(call.consumer))
                .map(|event| event.end())
                .filter(|start| *start > pause.at && *start < pause.end())
                .max()
                .unwrap_or(pause.at);
            let noticed = started + DETECTION_BOUND;
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

/// Invariant 4.
fn graceful_stops_are_clean(entries: &Entries, violations: &mut Vec<Violation>) {
    for stop in entries.stops.iter().filter(|stop| stop.forced) {
        violations.push(Violation {
            invariant: "every graceful stop reports clean",
            detail: format!("{} at {:?}: {}", stop.provider, stop.at, stop.report),
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
