//! The simulation's own record of what happened, written by the simulated hosts as it
//! happens (simulated time, `turmoil::sim_elapsed`) and read by the invariants after
//! the run: each call a consumer made and how it ended, each time a provider's handler
//! ran a call, each graceful stop's report, and what each consumer's directory held at
//! the end.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

/// One call a consumer made.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// The consumer that made it (its index).
    pub consumer: usize,
    /// When it was made.
    pub started: Duration,
    /// When it ended and how; `None` while unanswered (or forever, if its consumer
    /// crashed first).
    pub ended: Option<(Duration, CallEnd)>,
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallEnd {
    /// Answered by the provider on this host.
    Answered(String),
    /// Failed with this gRPC status code and message.
    Failed(tonic::Code, String),
}

/// One execution of a call by a provider's handler.
#[derive(Clone, Debug)]
pub struct Execution {
    /// The provider's host.
    pub provider: String,
    /// When the handler began.
    pub at: Duration,
}

/// A graceful stop and what its report said.
#[derive(Clone, Debug)]
pub struct StopRecord {
    /// The provider's host.
    pub provider: String,
    /// When its step 1 began (a stop asked of a process still starting waits for its
    /// start-up to end).
    pub began: Duration,
    /// When the stop ended.
    pub at: Duration,
    /// `ShutdownReport::forced()`: something was cut short.
    pub forced: bool,
    /// The report, for the failure report.
    pub report: String,
}

impl StopRecord {
    /// A stop (or drain) of `provider` that took `took` and ends now.
    fn ending_now(provider: &str, took: Duration, forced: bool, report: String) -> Self {
        Self {
            provider: provider.to_owned(),
            began: now().saturating_sub(took),
            at: now(),
            forced,
            report,
        }
    }
}

/// A registration a host's watch delivered that its previous snapshot did not list
/// (the first time, or again after it had been withdrawn), or listed otherwise (its
/// metadata changed: an online's revision, which lifts a consumer's closing mark).
#[derive(Clone, Debug)]
pub struct Arrival {
    /// The host that watched.
    pub host: String,
    /// The registration's address.
    pub authority: String,
    /// When its watch delivered it (simulated time).
    pub at: Duration,
}

/// Everything recorded in one run.
#[derive(Debug, Default)]
pub struct Ledger {
    inner: Mutex<Entries>,
}

/// The ledger's entries.
#[derive(Clone, Debug, Default)]
pub struct Entries {
    /// Calls by id (consumer in the high 32 bits, its sequence number in the low).
    pub calls: BTreeMap<u64, CallRecord>,
    /// Executions by call id.
    pub executions: BTreeMap<u64, Vec<Execution>>,
    /// Graceful stops, in the order they ended.
    pub stops: Vec<StopRecord>,
    /// The drains of generations that handed over to the next (a hot upgrade), in the
    /// order they ended.
    pub drains: Vec<StopRecord>,
    /// Upgrades that did not take over: the provider, when, and the report.
    pub upgrade_failures: Vec<(String, Duration, String)>,
    /// Starts that failed because the registry could not be reached, each started
    /// again a second later (as a supervisor restarts a process): the host, when, why.
    pub start_retries: Vec<(String, Duration, String)>,
    /// Manual offlines that took effect: the provider, when the offline had taken
    /// effect, and when the online was asked for (`None`: never).
    pub offlines: Vec<(String, Duration, Option<Duration>)>,
    /// Each consumer's directory at the end of the run: the addresses it could pick.
    pub directories: BTreeMap<usize, Vec<String>>,
    /// Processes that failed to start, and why.
    pub start_failures: Vec<(String, String)>,
    /// When each consumer (by index) started, each time it did.
    pub consumer_starts: Vec<(usize, Duration)>,
    /// Registrations each host's watches delivered, each time one arrived that the
    /// previous snapshot did not list (from the registry, at the end of the run).
    pub arrivals: Vec<Arrival>,
}

/// Simulated time now (zero outside a simulation).
pub fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

impl Ledger {
    /// A call made now.
    pub fn started(&self, id: u64, consumer: usize) {
        self.inner.lock().calls.insert(
            id,
            CallRecord {
                consumer,
                started: now(),
                ended: None,
            },
        );
    }

    /// A call ended now.
    pub fn ended(&self, id: u64, end: CallEnd) {
        if let Some(call) = self.inner.lock().calls.get_mut(&id) {
            call.ended = Some((now(), end));
        }
    }

    /// A provider's handler began call `id`.
    pub fn executed(&self, id: u64, provider: &str) {
        self.inner
            .lock()
            .executions
            .entry(id)
            .or_default()
            .push(Execution {
                provider: provider.to_owned(),
                at: now(),
            });
    }

    /// A graceful stop that took `took` from its step 1 ended.
    pub fn stopped(&self, provider: &str, took: Duration, forced: bool, report: String) {
        let record = StopRecord::ending_now(provider, took, forced, report);
        self.inner.lock().stops.push(record);
    }

    /// The drain of a generation of `provider` that handed over, which took `took`,
    /// ended.
    pub fn drained(&self, provider: &str, took: Duration, forced: bool, report: String) {
        let record = StopRecord::ending_now(provider, took, forced, report);
        self.inner.lock().drains.push(record);
    }

    /// An upgrade of `provider` did not take over.
    pub fn upgrade_failed(&self, provider: &str, report: String) {
        self.inner
            .lock()
            .upgrade_failures
            .push((provider.to_owned(), now(), report));
    }

    /// A process on `host` could not start because the registry could not be reached;
    /// it is started again.
    pub fn start_retried(&self, host: &str, error: String) {
        self.inner
            .lock()
            .start_retries
            .push((host.to_owned(), now(), error));
    }

    /// `provider`'s manual offline has taken effect.
    pub fn offline(&self, provider: &str) {
        self.inner
            .lock()
            .offlines
            .push((provider.to_owned(), now(), None));
    }

    /// `provider` is asked to go online again.
    pub fn online(&self, provider: &str) {
        let mut inner = self.inner.lock();
        let open = inner
            .offlines
            .iter_mut()
            .rev()
            .find(|(host, _, until)| host == provider && until.is_none());
        if let Some((_, _, until)) = open {
            *until = Some(now());
        }
    }

    /// What `consumer`'s directory held at the end.
    pub fn directory(&self, consumer: usize, addresses: Vec<String>) {
        self.inner.lock().directories.insert(consumer, addresses);
    }

    /// Consumer `index` started now.
    pub fn consumer_started(&self, index: usize) {
        self.inner.lock().consumer_starts.push((index, now()));
    }

    /// A process on `host` could not start.
    pub fn start_failed(&self, host: &str, error: String) {
        self.inner
            .lock()
            .start_failures
            .push((host.to_owned(), error));
    }

    /// Whether `provider` finished a graceful stop after `since`.
    pub fn stopped_since(&self, provider: &str, since: Duration) -> bool {
        self.inner
            .lock()
            .stops
            .iter()
            .any(|stop| stop.provider == provider && stop.at >= since)
    }

    /// A copy of the entries.
    pub fn entries(&self) -> Entries {
        self.inner.lock().clone()
    }
}
