//! One call on its way through the cluster, across its attempts.
//!
//! [`Call`] holds what one request needs from one attempt to the next — the request
//! itself (its body kept for replay), the instances already tried, the call's random
//! generator — and offers the runner (`run.rs`) a narrow set of steps: send one
//! answered attempt, describe the call to its strategy, spend a retry, give up. Each
//! attempt goes down the layers once and comes back:
//!
//! ```text
//! send ─ pick.rs      directory → blacklist (availability) → load balance
//!      ─ dispatch.rs  the instance's channel, bounded by the attempt's timeout,
//!                     inside the attempt's span (observe.rs)
//!      ─ learn.rs     the result → instance health, latency estimate, ejection
//!      ─ observe.rs   the result → the attempt's span and the attempt observer
//! ```

mod dispatch;
mod headers;
mod learn;
mod observe;
mod pick;
mod run;

pub(crate) use run::run;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use rand::rngs::SmallRng;
use rpc_core::metadata::{CONSUMER, CONSUMER_VALUE, RETRIES, grpc_timeout};
use rpc_core::{BoxError, InstanceId};
use smallvec::SmallVec;
use tonic::body::Body as TonicBody;
use tracing::Instrument;

use self::headers::RequestHeaders;
use self::pick::Route;
use crate::classify::{Failure, FailureKind, Outcome};
use crate::error::ClusterError;
use crate::invoker::Invoker;
use crate::replay::{RequestBody, SentFlag};
use crate::rng;
use crate::stack::ReferenceStack;
use crate::strategy::{CallFacts, Decision, Failed, Plan};

/// Most transparent re-sends of a request certainly not processed (gRPC's transparent
/// retry), per call; they do not count as retries. Bounded so that an instance that
/// keeps refusing streams cannot keep a call looping.
const TRANSPARENT_RESENDS: u8 = 3;

/// Most re-routes of an overload refusal per call (not counted as retries). One: a
/// single saturated instance is stepped around, but when the next one refuses too the
/// call ends (failover does not retry an overload refusal), so an overload is not
/// multiplied by re-routes.
const OVERLOAD_REROUTES: u8 = 1;

/// The state of one call across its attempts.
pub(crate) struct Call {
    stack: Arc<ReferenceStack>,
    /// The request's method, URI, version and extensions; its headers are in `headers`.
    parts: http::request::Parts,
    headers: RequestHeaders,
    body: RequestBody,
    /// The value of the consistent-hash header, when the load balance reads one.
    hash_key: Option<Bytes>,
    /// Bound on each attempt: the smaller of the configured timeout and the caller's
    /// `grpc-timeout`.
    timeout: Option<Duration>,
    /// The caller's deadline (`grpc-timeout`), which bounds the whole call.
    caller_deadline: Option<Duration>,
    idempotent: bool,
    retries_allowed: u32,
    /// Attempts answered so far (re-routed refusals of closing providers not counted).
    attempts: u32,
    /// Attempts sent so far, re-routed ones included (numbers each attempt's span).
    sent: u32,
    /// Instances this call was sent to; inline for the usual one or two attempts.
    tried: SmallVec<[InstanceId; 2]>,
    /// How often a request that was never processed was sent again (see `send`).
    unsent_resends: u8,
    /// How often an overload refusal was re-routed without counting (see `send`).
    overload_reroutes: u8,
    /// The failure to report if the call ends with no better one.
    last_failure: Option<Failure>,
    rng: SmallRng,
}

impl Call {
    /// A call of `request` through `stack`, with the method's settings and the caller's
    /// `grpc-timeout` and `rpc-retries` headers applied.
    pub(crate) fn new(stack: Arc<ReferenceStack>, request: Request<TonicBody>) -> Self {
        let (mut parts, body) = request.into_parts();
        // Tells the provider that this caller reads its closing mark and re-sends a
        // "not executed" refusal: it is then refused that way rather than with
        // REFUSED_STREAM, and its connection is not sent GOAWAY early.
        parts.headers.insert(CONSUMER, CONSUMER_VALUE);
        let config = &stack.config;
        let override_retries = parts
            .headers
            .remove(RETRIES)
            .and_then(|value| value.to_str().ok()?.trim().parse().ok());
        let method = parts.uri.path().rsplit('/').next().unwrap_or_default();
        let retries_allowed = override_retries.unwrap_or_else(|| config.retries_for(method));
        let caller_deadline = grpc_timeout(&parts.headers);
        let timeout = match (config.timeout_for(method), caller_deadline) {
            (Some(configured), Some(asked)) => Some(configured.min(asked)),
            (configured, asked) => configured.or(asked),
        };
        let idempotent = config.is_idempotent(method);
        let hash_key = stack
            .hash_header
            .as_ref()
            .and_then(|name| parts.headers.get(name))
            .map(|value| Bytes::copy_from_slice(value.as_bytes()));
        let headers = RequestHeaders::new(std::mem::take(&mut parts.headers));
        Self {
            body: RequestBody::capture(body, config.max_replay_bytes),
            headers,
            idempotent,
            rng: stack.rngs.for_call(),
            stack,
            parts,
            hash_key,
            timeout,
            caller_deadline,
            retries_allowed,
            attempts: 0,
            sent: 0,
            tried: SmallVec::new(),
            last_failure: None,
            unsent_resends: 0,
            overload_reroutes: 0,
        }
    }

    /// The caller's deadline (`grpc-timeout`), if it gave a valid one.
    pub(crate) fn caller_deadline(&self) -> Option<Duration> {
        self.caller_deadline
    }

    /// Where the call's strategy sends its attempts.
    fn plan(&self) -> Plan {
        self.stack.strategy.plan()
    }

    /// Picks an instance by `route` and sends the request to it, until an attempt is not
    /// a closing provider's refusal: such a request was not executed, so it goes to
    /// another instance under every strategy, without counting as a retry. `None` when
    /// no instance is left to try or the body cannot be sent again.
    async fn send(&mut self, route: Route) -> Option<Outcome> {
        loop {
            let invoker = self.pick(route)?;
            match self.attempt(&invoker).await? {
                Outcome::Failure(failure) if failure.kind == FailureKind::Rejected => {
                    self.stack.stats.note_reroute();
                    self.last_failure = Some(failure);
                }
                // An overloaded instance's refusal: not executed, re-routed once free.
                Outcome::Failure(failure)
                    if failure.kind == FailureKind::Overloaded
                        && self.overload_reroutes < OVERLOAD_REROUTES =>
                {
                    self.overload_reroutes += 1;
                    self.stack.stats.note_reroute();
                    self.last_failure = Some(failure);
                }
                // gRPC's transparent retry, at most TRANSPARENT_RESENDS times a call:
                // the request was certainly not processed (its connection had just
                // received a GOAWAY, or closed before the request was written). It is
                // sent again without counting as a retry, and the same instance stays
                // eligible: a new connection to the same address may reach a hot
                // upgrade's new process, the only one serving that instance. More than
                // once, because a re-send made at once can still be queued on the
                // closing connection before the channel has noticed it closed.
                Outcome::Failure(failure)
                    if failure.kind == FailureKind::NotSent
                        && self.unsent_resends < TRANSPARENT_RESENDS =>
                {
                    self.unsent_resends += 1;
                    self.tried.retain(|id| id != invoker.id());
                    self.last_failure = Some(failure);
                }
                outcome => {
                    self.attempts += 1;
                    return Some(outcome);
                }
            }
        }
    }

    /// Sends one attempt to `invoker`. `None` when the body can no longer be sent.
    async fn attempt(&mut self, invoker: &Arc<Invoker>) -> Option<Outcome> {
        let (body, sent) = self.body.attempt()?;
        self.tried.push(invoker.id().clone());
        self.sent += 1;
        let request = self.request_with(body);
        let target = Target {
            invoker,
            path: self.parts.uri.path(),
            number: self.sent,
        };
        let outcome = attempt(
            &self.stack,
            target,
            request,
            self.timeout,
            &sent,
            &mut self.rng,
        )
        .await;
        Some(outcome)
    }

    /// One attempt per instance of `invokers`, to run at once (as many as the body can
    /// be replayed for), each with a generator forked from the call's.
    fn send_each<'a>(
        &mut self,
        invokers: &'a [Arc<Invoker>],
    ) -> Vec<impl Future<Output = Outcome> + 'a> {
        let mut attempts = Vec::with_capacity(invokers.len());
        for invoker in invokers {
            let Some((body, sent)) = self.body.attempt() else {
                break;
            };
            let request = self.request_with(body);
            let stack = self.stack.clone();
            let timeout = self.timeout;
            let mut rng = rng::fork(&mut self.rng);
            self.sent += 1;
            let number = self.sent;
            // Forks are rare (forking, broadcast): one clone of the path each is fine.
            let uri = self.parts.uri.clone();
            attempts.push(async move {
                let target = Target {
                    invoker,
                    path: uri.path(),
                    number,
                };
                attempt(&stack, target, request, timeout, &sent, &mut rng).await
            });
        }
        attempts
    }

    /// A request for one more attempt, with `body`. The first attempt takes the
    /// request's headers and extensions (cloning them costs allocations on every call);
    /// later attempts get a copy of the headers and no extensions, as nothing below the
    /// cluster reads them.
    fn request_with(&mut self, body: TonicBody) -> Request<TonicBody> {
        let mut request = Request::new(body);
        *request.method_mut() = self.parts.method.clone();
        *request.uri_mut() = self.parts.uri.clone();
        *request.version_mut() = self.parts.version;
        *request.headers_mut() = self.headers.for_attempt();
        *request.extensions_mut() = std::mem::take(&mut self.parts.extensions);
        request
    }

    /// Asks the strategy what to do after `failed`.
    fn decide(&mut self, failed: Failed) -> Decision {
        let facts = CallFacts {
            attempts: self.attempts,
            retries_allowed: self.retries_allowed,
            idempotent: self.idempotent,
            replayable: self.body.replayable(),
        };
        self.stack
            .strategy
            .on_failure(failed, &facts, &mut self.rng)
    }

    /// Counts the call toward the retry budget, if its strategy retries.
    fn earn_retries(&self) {
        if let Some(budget) = &self.stack.retry_budget {
            budget.deposit();
        }
    }

    /// Takes one retry from the budget after `failure`, which is what the caller gets
    /// if no later attempt does better. False when the budget is spent: the call must
    /// give up.
    fn spend_retry(&mut self, failure: Failure) -> bool {
        let kind = failure.kind;
        self.last_failure = Some(failure);
        let budget = self.stack.retry_budget.as_ref();
        if budget.is_some_and(|budget| !budget.withdraw()) {
            self.stack.stats.note_budget_exhausted();
            tracing::debug!(service = %self.stack.directory.service(), "retry budget exhausted");
            return false;
        }
        self.stack.stats.note_retry(kind);
        true
    }

    /// Makes every instance eligible again (a background retry starts afresh).
    fn forget_tried(&mut self) {
        self.tried.clear();
    }

    /// The result to give the caller after the last attempt failed or none could be
    /// made: that failure, else the last one seen, else "no provider".
    fn give_up(self, failure: Option<Failure>) -> Result<Response<TonicBody>, BoxError> {
        match failure.or(self.last_failure) {
            Some(failure) => failure.into_result(),
            None => {
                self.stack.stats.note_no_provider();
                Err(Box::new(
                    ClusterError::NoProvider {
                        service: self.stack.directory.service().clone(),
                    }
                    .into_status(),
                ))
            }
        }
    }
}

/// Where one attempt goes, and which of its call's attempts it is.
struct Target<'a> {
    invoker: &'a Arc<Invoker>,
    /// The call's path, `/package.Service/Method`.
    path: &'a str,
    /// 1 for the call's first attempt, counting re-routed ones.
    number: u32,
}

/// One attempt on `target`, down to the instance and back up: dispatch it inside its
/// span, learn from its result, then tell the span and the observer how it went.
async fn attempt(
    stack: &ReferenceStack,
    target: Target<'_>,
    request: Request<TonicBody>,
    timeout: Option<Duration>,
    sent: &SentFlag,
    rng: &mut SmallRng,
) -> Outcome {
    let invoker = target.invoker;
    let span = observe::attempt_span(stack, target.path, invoker, target.number);
    let dispatched = dispatch::dispatch(invoker, request, timeout, sent)
        .instrument(span.clone())
        .await;
    let (blacklist, directory) = (&stack.blacklist, &stack.directory);
    let took = learn::learn(
        blacklist,
        directory,
        invoker,
        &dispatched.outcome,
        dispatched.started,
        rng,
    );
    observe::attempt_ended(stack, target.path, &dispatched.outcome, took, &span);
    dispatched.into_outcome()
}

/// Channels and calls for the tests of the call's steps.
#[cfg(test)]
pub(crate) mod testing {
    use rpc_core::{Instance, ServiceKey, Snapshot};
    use rpc_transport::ChannelOptions;

    use super::*;
    use crate::config::{BlacklistConfig, DirectoryConfig, ReferenceConfig};
    use crate::{ClusterChannel, Directory};

    /// An instance of `t.S` on port `n`, id `i{n}`.
    pub(crate) fn instance(n: u16) -> Instance {
        let mut instance = Instance::new(ServiceKey::new("t.S"), "127.0.0.1", n);
        instance.id = InstanceId::new(format!("i{n}"));
        instance
    }

    /// A channel with seed `seed` over instances on `ports`.
    pub(crate) fn channel(
        ports: &[u16],
        config: ReferenceConfig,
        blacklist: BlacklistConfig,
        seed: u64,
    ) -> ClusterChannel {
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
        ClusterChannel::new(directory, config, blacklist).with_seed(seed)
    }

    /// A call of `/t.S/M` on `channel`.
    pub(crate) fn call(channel: &ClusterChannel) -> Call {
        let request = Request::builder()
            .uri("/t.S/M")
            .body(TonicBody::empty())
            .unwrap();
        Call::new(channel.stack().clone(), request)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{call, channel};
    use super::*;
    use crate::config::{BlacklistConfig, ReferenceConfig};

    /// The instances picked and the backoffs drawn by `calls` calls on a channel seeded
    /// with `seed`, one pick and one failover decision per call.
    fn choices(seed: u64, calls: usize) -> Vec<(String, Decision)> {
        let channel = channel(
            &[1, 2, 3, 4, 5, 6],
            ReferenceConfig::default(),
            BlacklistConfig::default(),
            seed,
        );
        (0..calls)
            .map(|_| {
                let mut call = call(&channel);
                let picked = call.pick(Route::Balanced).unwrap().id().to_string();
                call.attempts = 1;
                let decision = call.decide(Failed::Attempt(FailureKind::NotSent));
                (picked, decision)
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_seed_makes_two_channels_choose_alike_backoffs_included() {
        let first = choices(42, 40);
        assert_eq!(first, choices(42, 40));
        assert!(
            first
                .iter()
                .all(|(_, decision)| matches!(decision, Decision::Retry { .. }))
        );
        assert!(
            first.iter().any(|(_, decision)| *decision != first[0].1),
            "backoffs are drawn, not fixed"
        );
        assert!(
            first.iter().any(|(id, _)| *id != first[0].0),
            "picks are spread"
        );
        assert_ne!(first, choices(43, 40), "another seed, other choices");
    }
}
