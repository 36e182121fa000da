//! One call on its way through the cluster: picking instances, sending attempts,
//! re-routing requests a closing provider refused, and recording what each attempt
//! taught us about the instance.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use rpc_core::metadata::{RETRIES, grpc_timeout};
use rpc_core::{BoxError, GuardedBody, InstanceId};
use smallvec::SmallVec;
use tokio::time::Instant;
use tonic::body::Body as TonicBody;
use tower::ServiceExt;

use crate::channel::ClusterInner;
use crate::classify::{
    Failure, FailureKind, Outcome, classify_error, classify_response, says_closing,
};
use crate::directory::Directory;
use crate::error::ClusterError;
use crate::health::Availability;
use crate::invoker::Invoker;
use crate::loadbalance::{Candidates, InvokerList, RequestInfo};
use crate::replay::RequestBody;

/// The state of one call across its attempts.
pub(crate) struct CallContext {
    pub(crate) cluster: Arc<ClusterInner>,
    parts: http::request::Parts,
    pub(crate) body: RequestBody,
    hash_key: Option<Bytes>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) idempotent: bool,
    pub(crate) retries: u32,
    /// Instances this call was sent to; inline for the usual one or two attempts.
    pub(crate) tried: SmallVec<[InstanceId; 2]>,
    pub(crate) last_failure: Option<Failure>,
    rng: fastrand::Rng,
}

impl CallContext {
    pub(crate) fn new(cluster: Arc<ClusterInner>, request: Request<TonicBody>) -> Self {
        let (mut parts, body) = request.into_parts();
        let config = &cluster.config;
        let override_retries = parts
            .headers
            .remove(RETRIES)
            .and_then(|value| value.to_str().ok()?.trim().parse().ok());
        let method = parts.uri.path().rsplit('/').next().unwrap_or_default();
        let retries = override_retries.unwrap_or_else(|| config.retries_for(method));
        let timeout = match (config.timeout_for(method), grpc_timeout(&parts.headers)) {
            (Some(configured), Some(asked)) => Some(configured.min(asked)),
            (configured, asked) => configured.or(asked),
        };
        let idempotent = config.is_idempotent(method);
        let hash_key = cluster
            .hash_header
            .as_ref()
            .and_then(|name| parts.headers.get(name))
            .map(|value| Bytes::copy_from_slice(value.as_bytes()));
        Self {
            body: RequestBody::capture(body, config.max_replay_bytes),
            idempotent,
            rng: cluster.rng(),
            cluster,
            parts,
            hash_key,
            timeout,
            retries,
            tried: SmallVec::new(),
            last_failure: None,
        }
    }

    /// Picks an instance not tried yet: the load balance's choice, or in panic mode
    /// (nothing selectable) the one whose ejection or closing ends soonest.
    pub(crate) fn pick(&mut self) -> Option<Arc<Invoker>> {
        self.pick_live(Directory::current, true)
    }

    /// Like [`CallContext::pick`], but never in panic mode: `None` when no instance is
    /// selectable (for extra forks, which must not go to an ejected or closing one).
    pub(crate) fn pick_selectable(&mut self) -> Option<Arc<Invoker>> {
        self.pick_live(Directory::current, false)
    }

    /// Picks from the list `current` reads from the directory (borrowed, so a pick
    /// writes no shared reference count). An instance removed by a registry update after
    /// the list was loaded is passed over and the pick made again from a fresh list, so a
    /// call never goes to an instance that already left.
    fn pick_live<L: std::ops::Deref<Target = InvokerList>>(
        &mut self,
        current: impl Fn(&Directory) -> L,
        panic: bool,
    ) -> Option<Arc<Invoker>> {
        loop {
            let list = current(&self.cluster.directory);
            let invoker = self.pick_from(&list, panic)?;
            if !invoker.is_removed() {
                return Some(invoker);
            }
            self.tried.push(invoker.id().clone());
        }
    }

    fn pick_from(&mut self, list: &InvokerList, panic: bool) -> Option<Arc<Invoker>> {
        let candidates = Candidates::new(
            list,
            &self.tried,
            Instant::now(),
            self.cluster.config.warmup,
        );
        let request = RequestInfo {
            path: self.parts.uri.path(),
            hash_key: self.hash_key.as_deref(),
        };
        let index = self
            .cluster
            .lb
            .select(&candidates, &request, &mut self.rng)
            .or_else(|| panic.then(|| self.panic_pick(&candidates)).flatten())?;
        Some(candidates.get(index).clone())
    }

    fn panic_pick(&self, candidates: &Candidates<'_>) -> Option<usize> {
        let now = candidates.now();
        let index = (0..candidates.len())
            .filter(|&i| {
                let invoker = candidates.get(i);
                invoker.weight() > 0 && !invoker.is_removed() && !self.tried.contains(invoker.id())
            })
            .min_by_key(|&i| match candidates.get(i).health().availability(now) {
                Availability::Unavailable { until } => until,
                _ => now,
            })?;
        self.cluster.blacklist.stats().note_panic_pick();
        Some(index)
    }

    /// Picks and sends until an attempt is not a rejection by a closing provider:
    /// such requests were not executed and go to another instance under every
    /// strategy, without counting as a retry. Returns `None` when no instance is left
    /// (or the body cannot be sent again).
    pub(crate) async fn send(&mut self) -> Option<Outcome> {
        loop {
            let invoker = self.pick()?;
            match self.attempt(&invoker).await? {
                Outcome::Failure(failure) if failure.kind == FailureKind::Rejected => {
                    self.cluster.stats.note_reroute();
                    self.last_failure = Some(failure);
                }
                outcome => return Some(outcome),
            }
        }
    }

    /// Sends one attempt to `invoker` and records its result in the instance's health
    /// and latency estimate. `None` when the body can no longer be sent.
    pub(crate) async fn attempt(&mut self, invoker: &Arc<Invoker>) -> Option<Outcome> {
        let (body, sent) = self.body.attempt()?;
        self.tried.push(invoker.id().clone());
        let request = self.request_with(body);
        let outcome = dispatch(&self.cluster, invoker, request, self.timeout, || {
            sent.was_sent()
        })
        .await;
        Some(outcome)
    }

    /// Attempts to send the request to each of `invokers` at once, one future each (as
    /// many as the body can be replayed for), for forking and broadcast.
    pub(crate) fn parallel_attempts<'a>(
        &mut self,
        invokers: &'a [Arc<Invoker>],
    ) -> Vec<impl std::future::Future<Output = Outcome> + 'a> {
        let mut attempts = Vec::with_capacity(invokers.len());
        for invoker in invokers {
            let Some((body, sent)) = self.body.attempt() else {
                break;
            };
            let request = self.request_with(body);
            let cluster = self.cluster.clone();
            let timeout = self.timeout;
            attempts.push(async move {
                dispatch(&cluster, invoker, request, timeout, || sent.was_sent()).await
            });
        }
        attempts
    }

    /// A request for one more attempt, with `body`. The first attempt takes the
    /// request's extensions (cloning them costs allocations on every call); later
    /// attempts go without, as nothing below the cluster reads them.
    pub(crate) fn request_with(&mut self, body: TonicBody) -> Request<TonicBody> {
        let mut request = Request::new(body);
        *request.method_mut() = self.parts.method.clone();
        *request.uri_mut() = self.parts.uri.clone();
        *request.version_mut() = self.parts.version;
        *request.headers_mut() = self.parts.headers.clone();
        *request.extensions_mut() = std::mem::take(&mut self.parts.extensions);
        request
    }

    /// The result to give the caller after the last attempt failed or none could be
    /// made.
    pub(crate) fn give_up(self, failure: Option<Failure>) -> Result<Response<TonicBody>, BoxError> {
        match failure.or(self.last_failure) {
            Some(failure) => failure.into_result(),
            None => {
                self.cluster.stats.note_no_provider();
                Err(Box::new(
                    ClusterError::NoProvider {
                        service: self.cluster.directory.service().clone(),
                    }
                    .into_status(),
                ))
            }
        }
    }
}

/// Sends `request` to `invoker`, bounded by `timeout`, and learns from the result.
pub(crate) async fn dispatch(
    cluster: &ClusterInner,
    invoker: &Arc<Invoker>,
    request: Request<TonicBody>,
    timeout: Option<Duration>,
    was_sent: impl Fn() -> bool,
) -> Outcome {
    let started = Instant::now();
    invoker.note_dispatch(started);
    if invoker.health().availability(started) == Availability::Probe {
        invoker.health().begin_probe(started);
    }
    let active = invoker.start_call();
    let outcome = match invoker.channel() {
        None => Outcome::Failure(Failure::status(
            FailureKind::NotSent,
            tonic::Status::unavailable(format!("instance {} is gone", invoker.authority())),
        )),
        Some(channel) => {
            let response = channel.oneshot(request);
            // A removed instance's calls are cancelled when its expiry passes. With a
            // timeout (the default) the call ends sooner anyway, so only untimed calls
            // pay for watching the cancellation.
            let result = match timeout {
                // The deadline from the clock already read saves a second read.
                Some(limit) => tokio::time::timeout_at(started + limit, response)
                    .await
                    .map_err(|_| Some(limit)),
                None => tokio::select! {
                    biased;
                    _ = invoker.destroyed().cancelled() => Err(None),
                    result = response => Ok(result),
                },
            };
            match result {
                Ok(Ok(response)) => classify_response(response.map(TonicBody::new)),
                Ok(Err(error)) => Outcome::Failure(classify_error(Box::new(error), was_sent())),
                Err(Some(elapsed)) => Outcome::Failure(Failure::status(
                    FailureKind::Timeout,
                    tonic::Status::deadline_exceeded(format!(
                        "no response from {} within {} ms",
                        invoker.authority(),
                        elapsed.as_millis()
                    )),
                )),
                Err(None) => {
                    let kind = if was_sent() {
                        FailureKind::Transport
                    } else {
                        FailureKind::NotSent
                    };
                    Outcome::Failure(Failure::status(
                        kind,
                        tonic::Status::unavailable(format!(
                            "instance {} was removed",
                            invoker.authority()
                        )),
                    ))
                }
            }
        }
    };
    learn(cluster, invoker, &outcome, started);
    match outcome {
        Outcome::Success(response) => {
            Outcome::Success(response.map(|b| TonicBody::new(GuardedBody::new(b, active))))
        }
        Outcome::AppError(response) => Outcome::AppError(response),
        failure => failure,
    }
}

/// Feeds one attempt's result to the blacklist and the latency estimate.
fn learn(cluster: &ClusterInner, invoker: &Arc<Invoker>, outcome: &Outcome, started: Instant) {
    let now = Instant::now();
    let rtt = now - started;
    let blacklist = &cluster.blacklist;
    let response = match outcome {
        Outcome::Success(response) | Outcome::AppError(response) => {
            invoker.note_result(false, now);
            invoker.observe_latency(rtt, now);
            blacklist.on_success(invoker, now);
            Some(response)
        }
        Outcome::Failure(failure) => {
            invoker.note_result(true, now);
            if failure.kind == FailureKind::Rejected {
                blacklist.mark_closing(invoker, now);
            } else {
                invoker.observe_latency(rtt.max(cluster.directory.config().failure_penalty), now);
                blacklist.on_failure(invoker, cluster.directory.current().invokers(), now);
            }
            failure.response.as_ref().ok()
        }
    };
    if response.is_some_and(says_closing) {
        blacklist.mark_closing(invoker, now);
    }
}

impl Failure {
    /// What the caller receives for this failure.
    ///
    /// A transport error becomes `UNAVAILABLE` (as gRPC's C++ and Java clients report a
    /// lost connection), keeping the error as the status's source.
    pub(crate) fn into_result(self) -> Result<Response<TonicBody>, BoxError> {
        match self.response {
            Ok(response) => Ok(response),
            Err(error) => {
                let message = match self.kind {
                    FailureKind::NotSent => format!("request not sent: {error}"),
                    _ => format!(
                        "connection failed after the request was sent (it may have run): {error}"
                    ),
                };
                let mut status = tonic::Status::unavailable(message);
                status.set_source(Arc::from(error));
                Err(Box::new(status))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rpc_core::transport::ChannelOptions;
    use rpc_core::{Instance, ServiceKey, Snapshot};

    use super::*;
    use crate::config::{BlacklistConfig, DirectoryConfig, ReferenceConfig};
    use crate::{ClusterChannel, Directory};

    fn instance(n: u16) -> Instance {
        let mut instance = Instance::new(ServiceKey::new("t.S"), "127.0.0.1", n);
        instance.id = InstanceId::new(format!("i{n}"));
        instance
    }

    fn cluster(ports: &[u16], blacklist: BlacklistConfig) -> ClusterChannel {
        let directory = Arc::new(Directory::new(
            ServiceKey::new("t.S"),
            DirectoryConfig::default(),
            ChannelOptions::default(),
        ));
        directory.apply(Snapshot::new(
            ServiceKey::new("t.S"),
            1,
            ports.iter().map(|&p| instance(p)).collect(),
        ));
        ClusterChannel::new(directory, ReferenceConfig::default(), blacklist).with_seed(3)
    }

    fn call(channel: &ClusterChannel) -> CallContext {
        let request = Request::builder()
            .uri("/t.S/M")
            .body(TonicBody::empty())
            .unwrap();
        CallContext::new(channel.inner().clone(), request)
    }

    #[tokio::test(start_paused = true)]
    async fn a_pick_whose_instance_was_removed_meanwhile_is_made_again() {
        let channel = cluster(&[1, 2], BlacklistConfig::default());
        let directory = channel.directory().clone();
        let stale = directory.list();
        // Make instance 2 look slow, so P2C on the stale list chooses instance 1 ...
        stale.invokers()[1].observe_latency(Duration::from_secs(1), Instant::now());
        // ... which the registry removes before the call is sent.
        directory.apply(Snapshot::new(ServiceKey::new("t.S"), 2, vec![instance(2)]));
        let mut call = call(&channel);
        let loads = std::sync::atomic::AtomicUsize::new(0);
        let picked = call
            .pick_live(
                |_| {
                    if loads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                        stale.clone()
                    } else {
                        directory.list()
                    }
                },
                true,
            )
            .unwrap();
        assert_eq!(picked.id().as_str(), "i2");
        assert_eq!(
            call.tried.as_slice(),
            [InstanceId::new("i1")],
            "the removed choice was passed over"
        );
        assert_eq!(
            loads.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "a fresh list was loaded"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn all_ejected_instances_take_panic_picks_and_recover_within_one_ejection_time() {
        let blacklist = BlacklistConfig {
            max_ejection_percent: 100,
            jitter: 0.0,
            ..BlacklistConfig::default()
        };
        let channel = cluster(&[1, 2, 3], blacklist);
        let list = channel.directory().list();
        let inner = channel.inner().clone();
        for invoker in list.invokers() {
            for _ in 0..5 {
                inner
                    .blacklist
                    .on_failure(invoker, list.invokers(), Instant::now());
            }
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        let now = Instant::now();
        assert!(
            list.invokers().iter().all(|i| i.health().ejected(now)),
            "all ejected"
        );
        // Panic mode: the call still goes somewhere — the instance back soonest.
        let picked = call(&channel).pick().unwrap();
        assert_eq!(picked.id().as_str(), "i1");
        assert_eq!(channel.stats().blacklist.panic_picks, 1);

        // The instances heal; one ejection time later each is probed once and restored.
        // Calls arrive; no time passes beyond the one ejection time.
        tokio::time::advance(Duration::from_secs(30)).await;
        for _ in 0..50 {
            let invoker = call(&channel).pick().unwrap();
            let now = Instant::now();
            if invoker.availability(now) == crate::Availability::Probe {
                assert!(invoker.health().begin_probe(now));
            }
            inner.blacklist.on_success(&invoker, now);
        }
        let now = Instant::now();
        assert!(
            list.invokers()
                .iter()
                .all(|i| i.availability(now) == crate::Availability::Ready)
        );
        assert_eq!(channel.stats().blacklist.recoveries, 3);
    }
}
