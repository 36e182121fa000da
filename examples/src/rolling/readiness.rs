//! `--admin`: what each instance's admin endpoint says about its readiness during the
//! run, as an orchestrator's readiness probe would see it. Every instance the fleet
//! starts is watched: `GET /ready` every [`POLL_EVERY`] until its admin endpoint stops
//! answering, recording each change — ready (200), not ready (503, with the reason:
//! shutting down, manually offline), gone (the endpoint closed in shutdown step 6).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rpc_testkit::http;
use serde::Serialize;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// How often each instance is asked.
pub const POLL_EVERY: Duration = Duration::from_millis(100);

/// Longest wait for one answer: a probe that does not answer in time is "not ready".
const ANSWER_WITHIN: Duration = Duration::from_millis(500);

/// What one poll found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// `/ready` answered 200.
    Ready,
    /// `/ready` answered 503 (or something else, or nothing in time).
    NotReady,
    /// The admin endpoint no longer accepts connections: the instance has stopped.
    Gone,
}

/// One change of one instance's readiness.
#[derive(Clone, Debug, Serialize)]
pub struct ReadinessChange {
    /// Seconds after the load started (negative: before it).
    pub at_s: f64,
    /// The new state.
    pub state: Readiness,
    /// The probe's one-line reason (or why there was none).
    pub reason: String,
}

/// The readiness history of one instance.
#[derive(Clone, Debug, Serialize)]
pub struct ReadinessRecord {
    /// `proxy-0`, `provider-1`, ... (a replacement has its predecessor's name).
    pub instance: String,
    /// Its admin endpoint.
    pub admin: String,
    /// Each change, in order.
    pub changes: Vec<ReadinessChange>,
}

impl ReadinessRecord {
    /// When it was first seen in `state`, in seconds after the load started.
    pub fn first(&self, state: Readiness) -> Option<f64> {
        self.changes
            .iter()
            .find(|change| change.state == state)
            .map(|change| change.at_s)
    }
}

/// One instance being watched.
struct Watched {
    instance: String,
    admin: SocketAddr,
    changes: Vec<(Instant, Readiness, String)>,
}

impl Watched {
    fn last(&self) -> Option<Readiness> {
        self.changes.last().map(|(_, state, _)| *state)
    }
}

/// Watches the readiness of every instance it is given, from one task. Cheap to
/// clone; the polling stops when the last clone is dropped or [`ReadinessWatch::stop`]
/// is called.
#[derive(Clone)]
pub struct ReadinessWatch {
    watched: Arc<Mutex<Vec<Watched>>>,
    poller: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for ReadinessWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadinessWatch")
            .field("watched", &self.watched.lock().len())
            .finish()
    }
}

impl ReadinessWatch {
    /// Starts polling (nothing yet to poll). Must be called inside a tokio runtime.
    pub fn start() -> Self {
        let watched: Arc<Mutex<Vec<Watched>>> = Arc::default();
        let poller = tokio::spawn(poll_forever(Arc::downgrade(&watched)));
        Self {
            watched,
            poller: Arc::new(Mutex::new(Some(poller))),
        }
    }

    /// Adds `instance`, whose admin endpoint is at `admin`.
    pub fn watch(&self, instance: &str, admin: SocketAddr) {
        self.watched.lock().push(Watched {
            instance: instance.to_owned(),
            admin,
            changes: Vec::new(),
        });
    }

    /// Stops polling and returns every instance's history, times counted from `origin`
    /// (the start of the load), in the order they were first watched.
    pub fn stop(&self, origin: Instant) -> Vec<ReadinessRecord> {
        if let Some(poller) = self.poller.lock().take() {
            poller.abort();
        }
        let seconds = |at: Instant| {
            if at >= origin {
                (at - origin).as_secs_f64()
            } else {
                -(origin - at).as_secs_f64()
            }
        };
        self.watched
            .lock()
            .iter()
            .map(|watched| ReadinessRecord {
                instance: watched.instance.clone(),
                admin: watched.admin.to_string(),
                changes: watched
                    .changes
                    .iter()
                    .map(|(at, state, reason)| ReadinessChange {
                        at_s: seconds(*at),
                        state: *state,
                        reason: reason.clone(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Every [`POLL_EVERY`], asks each instance not yet gone, all at once, and records what
/// changed. Ends when the watch is dropped.
async fn poll_forever(watched: std::sync::Weak<Mutex<Vec<Watched>>>) {
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(watched) = watched.upgrade() else {
            return;
        };
        let targets: Vec<(usize, SocketAddr)> = watched
            .lock()
            .iter()
            .enumerate()
            .filter(|(_, w)| w.last() != Some(Readiness::Gone))
            .map(|(index, w)| (index, w.admin))
            .collect();
        let mut polls = JoinSet::new();
        for (index, admin) in targets {
            polls.spawn(async move { (index, ask(admin).await) });
        }
        while let Some(Ok((index, (state, reason)))) = polls.join_next().await {
            let mut watched = watched.lock();
            let entry = &mut watched[index];
            if entry.last() != Some(state) {
                entry.changes.push((Instant::now(), state, reason));
            }
        }
    }
}

/// One `GET /ready`.
async fn ask(admin: SocketAddr) -> (Readiness, String) {
    match tokio::time::timeout(ANSWER_WITHIN, http::get(admin, "/ready")).await {
        Ok(Ok(answer)) if answer.status == 200 => (Readiness::Ready, answer.body.trim().to_owned()),
        Ok(Ok(answer)) => (Readiness::NotReady, answer.body.trim().to_owned()),
        Ok(Err(error)) if refused(&*error) => (Readiness::Gone, "admin endpoint closed".to_owned()),
        Ok(Err(error)) => (Readiness::NotReady, error.to_string()),
        Err(_) => (
            Readiness::NotReady,
            format!("no answer within {ANSWER_WITHIN:?}"),
        ),
    }
}

/// Whether `error` is a refused connection: nothing listens any more.
fn refused(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// The readiness section of the run's table: one line per instance, with when it was
/// first seen ready, not ready (and why) and gone, in seconds after the load started.
pub(crate) fn write_table(records: &[ReadinessRecord], out: &mut String) {
    use std::fmt::Write as _;
    if records.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  readiness (GET /ready on each admin endpoint every {} ms; s after the load started)",
        POLL_EVERY.as_millis()
    );
    let _ = writeln!(
        out,
        "    instance    admin                   ready  not ready     gone  why not ready"
    );
    let at = |at: Option<f64>| {
        // Rounded first, so that a moment before the load shows as 0.0s, not -0.0s.
        at.map_or_else(
            || "-".to_owned(),
            |s| format!("{:.1}s", (s * 10.0).round() / 10.0 + 0.0),
        )
    };
    for record in records {
        let not_ready = record
            .changes
            .iter()
            .find(|change| change.state == Readiness::NotReady);
        let _ = writeln!(
            out,
            "    {:<11} {:<21} {:>7} {:>10} {:>8}  {}",
            record.instance,
            record.admin,
            at(record.first(Readiness::Ready)),
            at(not_ready.map(|change| change.at_s)),
            at(record.first(Readiness::Gone)),
            not_ready.map_or("", |change| change.reason.as_str()),
        );
    }
}
