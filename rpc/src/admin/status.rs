//! `GET /status`: the application as JSON — phase and its history, the probes,
//! registrations registry by registry, each reference with its instances, in-flight
//! counters, the shutdown's steps, and what the browser rules refused. Everything is read through the lifecycle's and
//! the cluster's public API; this file only shapes it for people and for the page.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use rpc_cluster::{Availability, ClusterChannel, ClusterKind, Invoker, LoadBalanceKind};
use rpc_lifecycle::Lifecycle;
use rpc_lifecycle::{Pending, Registration};
use rpc_lifecycle::{Probe, ProbeAnswer};
use rpc_lifecycle::{ShutdownReport, Step, StepOutcome};
use serde::Serialize;
use tokio::time::Instant;

use super::answer;
use super::browser::RefusalCounts;
use super::state::AdminState;
use super::upgrade::{UpgradeStepView, UpgradeView};

/// The whole answer of `GET /status`. Durations are milliseconds.
#[derive(Serialize)]
pub(crate) struct Status {
    application: String,
    /// This process: after a hot upgrade, the new generation's.
    pid: u32,
    phase: String,
    /// How long the application has been in `phase`.
    phase_ms: u64,
    /// Every phase entered, with when, counted from the first.
    phases: Vec<PhaseEntry>,
    probes: Probes,
    /// Provided services that are manually offline.
    offline: Vec<String>,
    /// The providers' listeners.
    listeners: Vec<String>,
    in_flight: InFlight,
    /// Registrations, registry by registry.
    registries: Vec<RegistryView>,
    /// How many registrations may be missing from their registry and are being written
    /// again (`pending` or `reregistering` below).
    pending_registrations: usize,
    references: Vec<ReferenceView>,
    shutdown: ShutdownView,
    /// The last hot upgrade this process ran (decided), if any.
    last_upgrade: Option<UpgradeView>,
    /// The steps of the hot upgrade under way, so far (or of the last one): a running
    /// upgrade shows here before it is decided.
    upgrade_steps: Vec<UpgradeStepView>,
    /// Requests the admin endpoint refused as a web page could have sent them (a
    /// foreign `Origin` or `Host`, a changing POST without proof), by rule, since it
    /// started.
    browser_refusals: RefusalCounts,
}

/// The shutdown sequence: its steps so far, each with its duration and outcome, while
/// it runs — the admin endpoint closes in step 6, so this is what it shows of a
/// shutdown — and the report of one that finished, for an endpoint that outlives its
/// sequence (a listener handed over by a hot upgrade).
#[derive(Serialize)]
struct ShutdownView {
    steps: Vec<StepView>,
    /// The finished shutdown's report as one line (as the shutdown logs it).
    report: Option<String>,
    /// What the report implies: 0 clean, 1 forced, 130 / 143 interrupted.
    exit_code: Option<i32>,
}

#[derive(Serialize)]
struct StepView {
    step: Step,
    duration_ms: f64,
    outcome: StepOutcome,
}

#[derive(Serialize)]
struct PhaseEntry {
    phase: String,
    at_ms: u64,
}

/// The three probes' answers, in the order they matter at start-up.
#[derive(Serialize)]
struct Probes {
    live: ProbeView,
    startup: ProbeView,
    ready: ProbeView,
}

#[derive(Serialize)]
struct ProbeView {
    passed: bool,
    reason: String,
}

#[derive(Serialize)]
struct InFlight {
    /// Requests this application's providers are serving.
    inbound: usize,
    /// Calls this application's references have in flight.
    outbound: usize,
}

#[derive(Serialize)]
struct RegistryView {
    registry: String,
    registrations: Vec<RegistrationView>,
}

#[derive(Serialize)]
struct RegistrationView {
    service: String,
    instance: String,
    address: String,
    weight: u32,
    /// `registered`; `offline` while withdrawn by a manual offline; `pending` while
    /// registering it again failed and is retried until it holds (`retry` says how it
    /// goes); `withdrawing` while a manual offline's withdrawal failed and is retried;
    /// `reregistering` while its registry client lost its session, lease or connection
    /// and writes it again by itself.
    state: &'static str,
    /// While `pending` or `withdrawing`: the attempts that failed, the last one's
    /// error, and for how long.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry: Option<RetryView>,
    /// The registration's `online-revision` metadata (how many manual onlines wrote
    /// it), once one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    online_revision: Option<String>,
}

#[derive(Serialize)]
struct RetryView {
    attempts: u32,
    last_error: String,
    pending_ms: u64,
}

#[derive(Serialize)]
struct ReferenceView {
    service: String,
    cluster: ClusterKind,
    loadbalance: LoadBalanceKind,
    /// Calls made through the reference, and what the cluster did about failures.
    calls: u64,
    retries: u64,
    reroutes: u64,
    ejections: u64,
    instances: Vec<InstanceView>,
}

#[derive(Serialize)]
struct InstanceView {
    id: String,
    address: String,
    weight: u32,
    /// `healthy`, `suspected` (an overdue call's PING is out), `ejected` (by the
    /// blacklist) or `closing` (it said it is leaving).
    state: &'static str,
    in_flight: usize,
    /// The peak-EWMA latency estimate P2C weighs.
    latency_ms: f64,
    /// Attempts sent to it, and how many failed.
    dispatched: u64,
    failures: u64,
}

/// `GET /status`.
pub(crate) async fn status(State(state): State<AdminState>) -> Response {
    answer::json(StatusCode::OK, &Status::of(&state))
}

impl Status {
    /// The status of the application `state` shows, now.
    pub(crate) fn of(state: &AdminState) -> Self {
        let lifecycle = &state.lifecycle;
        let (phases, phase_ms) = phases(lifecycle);
        let registrations = lifecycle.registrations_by_registry();
        Self {
            application: lifecycle.name().to_owned(),
            pid: std::process::id(),
            phase: lifecycle.phase().to_string(),
            phase_ms,
            phases,
            probes: Probes {
                live: lifecycle.probe(Probe::Live).into(),
                startup: lifecycle.probe(Probe::Startup).into(),
                ready: lifecycle.probe(Probe::Ready).into(),
            },
            offline: lifecycle
                .offline_services()
                .iter()
                .map(ToString::to_string)
                .collect(),
            listeners: lifecycle
                .servers()
                .iter()
                .map(|server| server.local_addr().to_string())
                .collect(),
            in_flight: InFlight {
                inbound: lifecycle.inbound().current(),
                outbound: lifecycle.outbound().current(),
            },
            registries: registries(&registrations),
            pending_registrations: registrations
                .iter()
                .filter(|registration| registration.pending.is_some())
                .count(),
            references: state.references.iter().map(ReferenceView::of).collect(),
            shutdown: ShutdownView::of(lifecycle),
            last_upgrade: lifecycle.last_upgrade().as_ref().map(UpgradeView::of),
            upgrade_steps: lifecycle
                .upgrade_steps()
                .iter()
                .map(UpgradeStepView::of)
                .collect(),
            browser_refusals: state.refusals.counts(),
        }
    }
}

/// The phase history counted from its first entry, and the time in the current phase.
fn phases(lifecycle: &Lifecycle) -> (Vec<PhaseEntry>, u64) {
    let history = lifecycle.phase_history();
    let Some((_, first)) = history.first().copied() else {
        return (Vec::new(), 0);
    };
    let current = history.last().map_or(0, |(_, at)| ms(at.elapsed()));
    let entries = history
        .into_iter()
        .map(|(phase, at)| PhaseEntry {
            phase: phase.to_string(),
            at_ms: ms(at - first),
        })
        .collect();
    (entries, current)
}

fn registries(registrations: &[Registration]) -> Vec<RegistryView> {
    let mut by_registry: BTreeMap<String, Vec<RegistrationView>> = BTreeMap::new();
    for registration in registrations {
        let instance = &registration.instance;
        let retry_view = |since: &tokio::time::Instant, attempts: &u32, last_error: &String| {
            Some(RetryView {
                attempts: *attempts,
                last_error: last_error.clone(),
                pending_ms: ms(since.elapsed()),
            })
        };
        let (state, retry) = match &registration.pending {
            Some(Pending::Withdrawing {
                since,
                attempts,
                last_error,
            }) => ("withdrawing", retry_view(since, attempts, last_error)),
            _ if !registration.online => ("offline", None),
            None => ("registered", None),
            Some(Pending::Retrying {
                since,
                attempts,
                last_error,
            }) => ("pending", retry_view(since, attempts, last_error)),
            Some(_) => ("reregistering", None),
        };
        by_registry
            .entry(registration.registry.clone())
            .or_default()
            .push(RegistrationView {
                service: instance.service.to_string(),
                instance: instance.id.to_string(),
                address: instance.authority(),
                weight: instance.weight,
                state,
                retry,
                online_revision: instance
                    .metadata
                    .get(rpc_lifecycle::ONLINE_REVISION)
                    .cloned(),
            });
    }
    by_registry
        .into_iter()
        .map(|(registry, registrations)| RegistryView {
            registry,
            registrations,
        })
        .collect()
}

impl ShutdownView {
    fn of(lifecycle: &Lifecycle) -> Self {
        let report = lifecycle.shutdown_report();
        Self {
            steps: lifecycle
                .shutdown_steps()
                .into_iter()
                .map(|step| StepView {
                    step: step.step,
                    duration_ms: step.duration.as_secs_f64() * 1e3,
                    outcome: step.outcome,
                })
                .collect(),
            exit_code: report.as_ref().map(ShutdownReport::exit_code),
            report: report.map(|report| report.to_string()),
        }
    }
}

impl ReferenceView {
    fn of(channel: &ClusterChannel) -> Self {
        let counts = channel.stats();
        let config = channel.config();
        let now = Instant::now();
        Self {
            service: channel.directory().service().to_string(),
            cluster: config.cluster,
            loadbalance: config.loadbalance.clone(),
            calls: counts.calls,
            retries: counts.retries,
            reroutes: counts.reroutes,
            ejections: counts.blacklist.ejections,
            instances: channel
                .directory()
                .list()
                .invokers()
                .iter()
                .map(|invoker| InstanceView::of(invoker, now))
                .collect(),
        }
    }
}

impl InstanceView {
    fn of(invoker: &Invoker, now: Instant) -> Self {
        let stats = invoker.stats();
        Self {
            id: invoker.id().to_string(),
            address: invoker.authority().to_owned(),
            weight: invoker.weight(),
            state: instance_state(invoker, now),
            in_flight: invoker.active(),
            latency_ms: invoker.latency_estimate(now).as_secs_f64() * 1e3,
            dispatched: stats.dispatched,
            failures: stats.failures,
        }
    }
}

/// What the cluster thinks of an instance: `closing` once it said it is leaving,
/// `suspected` while an overdue call's PING is out, `ejected` while the blacklist keeps
/// it out (or it awaits its probe), else `healthy`.
fn instance_state(invoker: &Invoker, now: Instant) -> &'static str {
    if invoker.is_closing(now) {
        return "closing";
    }
    if invoker.is_suspected() {
        return "suspected";
    }
    match invoker.availability(now) {
        Availability::Ready => "healthy",
        Availability::Probe | Availability::Unavailable { .. } => "ejected",
    }
}

impl From<ProbeAnswer> for ProbeView {
    fn from(answer: ProbeAnswer) -> Self {
        Self {
            passed: answer.passed,
            reason: answer.reason,
        }
    }
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
