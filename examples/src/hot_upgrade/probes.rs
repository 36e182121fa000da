//! What runs beside the unary load: a new connection every few milliseconds, server
//! streams kept open, and (with a registry) a watcher that notes every moment the
//! instance was missing from it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use lossless_rpc::ServiceKey;
use parking_lot::Mutex;
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use tokio::time::Instant;
use tonic::transport::Endpoint;

use super::provider::STREAM_INTERVAL;

/// Counts of the probes, shared with the tasks that run them.
#[derive(Debug, Default)]
pub struct ProbeCounts {
    /// New connections attempted.
    pub connections_attempted: AtomicU64,
    /// New connections refused (or otherwise not established).
    pub connections_refused: AtomicU64,
    /// Calls on a new connection that failed after it was established.
    pub connection_calls_failed: AtomicU64,
    /// Server streams opened.
    pub streams_opened: AtomicU64,
    /// Server streams that ended with an error, or with fewer replies than asked.
    pub streams_cut: AtomicU64,
    /// Samples of what went wrong (at most 10).
    pub samples: Mutex<Vec<String>>,
    /// Set to stop every probe.
    pub stop: AtomicBool,
}

impl ProbeCounts {
    fn sample(&self, what: String) {
        let mut samples = self.samples.lock();
        if samples.len() < 10 {
            samples.push(what);
        }
    }
}

/// Dials `addr` anew every `every`, makes one call on the new connection, and drops it.
pub fn spawn_connector(addr: String, every: Duration, counts: Arc<ProbeCounts>) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !counts.stop.load(Ordering::Relaxed) {
            ticker.tick().await;
            let counts = counts.clone();
            let addr = addr.clone();
            tokio::spawn(async move {
                counts.connections_attempted.fetch_add(1, Ordering::Relaxed);
                let endpoint = match Endpoint::from_shared(format!("http://{addr}")) {
                    Ok(endpoint) => endpoint.connect_timeout(Duration::from_secs(3)),
                    Err(_) => return,
                };
                let channel = match endpoint.connect().await {
                    Ok(channel) => channel,
                    Err(error) => {
                        counts.connections_refused.fetch_add(1, Ordering::Relaxed);
                        counts.sample(format!("connect: {error:?}"));
                        return;
                    }
                };
                let request = HelloRequest {
                    name: "new connection".into(),
                    count: 1,
                };
                if let Err(status) = GreeterClient::new(channel).say_hello(request).await {
                    counts
                        .connection_calls_failed
                        .fetch_add(1, Ordering::Relaxed);
                    counts.sample(format!("call on a new connection: {status}"));
                }
            });
        }
    });
}

/// Keeps `streams` server streams of `length` open through `client` (the consumer's
/// reference) until stopped: each that ends is replaced.
pub fn spawn_streams(
    client: GreeterClient<lossless_rpc::ReferenceChannel>,
    streams: usize,
    length: Duration,
    counts: Arc<ProbeCounts>,
) {
    let replies = (length.as_millis() / STREAM_INTERVAL.as_millis()).max(1) as u32;
    for n in 0..streams {
        let counts = counts.clone();
        let client = client.clone();
        tokio::spawn(async move {
            // Streams start spread over one stream length, so some always straddle an
            // upgrade.
            tokio::time::sleep(length * n as u32 / streams.max(1) as u32).await;
            while !counts.stop.load(Ordering::Relaxed) {
                counts.streams_opened.fetch_add(1, Ordering::Relaxed);
                let mut client = client.clone();
                let request = HelloRequest {
                    name: format!("stream {n}"),
                    count: replies,
                };
                let received = match client.say_hello_stream(request).await {
                    Ok(response) => {
                        let mut stream = response.into_inner();
                        let mut received = 0;
                        let mut error = None;
                        while let Some(item) = stream.next().await {
                            match item {
                                Ok(_) => received += 1,
                                Err(status) => {
                                    error = Some(status);
                                    break;
                                }
                            }
                        }
                        error.map_or(Ok(received), Err)
                    }
                    Err(status) => Err(status),
                };
                match received {
                    Ok(got) if got == replies => {}
                    Ok(got) => {
                        counts.streams_cut.fetch_add(1, Ordering::Relaxed);
                        counts.sample(format!("stream ended after {got} of {replies} replies"));
                    }
                    Err(status) => {
                        counts.streams_cut.fetch_add(1, Ordering::Relaxed);
                        counts.sample(format!("stream: {status}"));
                    }
                }
            }
        });
    }
}

/// What a watcher of the registry saw of the instance: whether it was listed, the
/// snapshots after that which lacked it, and how long it was missing in all (the sum of
/// the intervals of snapshots without it).
#[derive(Debug, Default)]
pub struct Absence {
    /// Whether a snapshot listed the instance.
    pub seen: bool,
    missing_since: Option<Instant>,
    /// Total time missing so far.
    pub total: Duration,
    /// Snapshots received.
    pub snapshots: u64,
    /// Snapshots, after the first that listed the instance, that did not.
    pub without: u64,
}

/// Watches `service` in the registry at `url`, recording when it had no instance.
///
/// # Errors
/// When the registry cannot be reached or subscribed to.
pub async fn watch_registry(url: &str, service: ServiceKey) -> Result<Arc<Mutex<Absence>>, String> {
    let registry = lossless_rpc::registry::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let mut subscription = registry
        .subscribe(&service)
        .await
        .map_err(|e| e.to_string())?;
    let absence = Arc::new(Mutex::new(Absence::default()));
    let record = absence.clone();
    tokio::spawn(async move {
        // Keeps the client alive as long as the watch runs.
        let _registry = registry;
        while let Some(snapshot) = subscription.next().await {
            let mut absence = record.lock();
            absence.snapshots += 1;
            let present = !snapshot.instances.is_empty();
            if absence.seen && !present {
                absence.without += 1;
            }
            let now = Instant::now();
            match (present, absence.missing_since) {
                (true, Some(since)) => {
                    absence.total += now - since;
                    absence.missing_since = None;
                }
                (false, None) if absence.seen => absence.missing_since = Some(now),
                _ => {}
            }
            absence.seen |= present;
        }
    });
    Ok(absence)
}

impl Absence {
    /// The total, counting a gap still open now.
    pub fn total_now(&self) -> Duration {
        self.total
            + self
                .missing_since
                .map_or(Duration::ZERO, |since| since.elapsed())
    }
}
