//! One call on its way through the cluster, across its attempts.
//!
//! [`Call`] holds what one request needs from one attempt to the next — the request
//! itself (its body kept for replay), the instances already tried, the call's random
//! generator. Its control flow has one owner, `run.rs`: the strategy's plan, the
//! re-routes, the retries and their budget, giving up. Each attempt goes down the
//! layers once and comes back:
//!
//! ```text
//! run.rs ─ pick.rs        directory → blacklist (availability) → load balance
//!        ─ attempt.rs ─ dispatch.rs  the instance's channel, bounded by the attempt's
//!                                    timeout, inside the attempt's span (telemetry.rs)
//!                     ─ learn.rs     the result → instance health, latency, ejection
//!                     ─ slow_dial.rs a dial left overdue, finished in the background
//!                     ─ telemetry.rs the result → the attempt's span and observer
//! ```

mod attempt;
mod dispatch;
mod headers;
mod learn;
mod pick;
mod run;
mod slow_dial;
mod swallow;
mod telemetry;
mod wait_for_provider;

pub(crate) use run::run;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use rand::rngs::SmallRng;
use rpc_core::metadata::{
    CONSUMER, CONSUMER_VALUE, GRPC_TIMEOUT, RETRIES, grpc_timeout, grpc_timeout_value,
};
use rpc_core::trace_context::TRACEPARENT;
use rpc_core::{CallContext, InstanceId, TraceContext};
use smallvec::SmallVec;
use tokio::time::Instant;
use tonic::body::Body as TonicBody;

use self::dispatch::Wait;
use self::headers::RequestHeaders;
use crate::classify::Failure;
use crate::replay::{RequestBody, RequestEnd};
use crate::resume::ResumeAttempt;
use crate::stack::ReferenceStack;
use crate::strategy::Plan;

/// Most transparent re-sends of a request certainly not processed (gRPC's transparent
/// retry), per call; they do not count as retries. Bounded so that an instance that
/// keeps refusing streams cannot keep a call looping.
pub(super) const TRANSPARENT_RESENDS: u8 = 3;

/// Most re-routes of an overload refusal per call (not counted as retries). One: a
/// single saturated instance is stepped around, but when the next one refuses too the
/// call ends (failover does not retry an overload refusal), so an overload is not
/// multiplied by re-routes.
pub(super) const OVERLOAD_REROUTES: u8 = 1;

/// The state of one call across its attempts.
pub(crate) struct Call {
    stack: Arc<ReferenceStack>,
    /// The request's method, URI, version and extensions; its headers are in `headers`.
    parts: http::request::Parts,
    headers: RequestHeaders,
    body: RequestBody,
    /// The value of the consistent-hash header, when the load balance reads one.
    hash_key: Option<Bytes>,
    /// The configured bound on each attempt (the method's `timeout`).
    timeout: Option<Duration>,
    /// The caller's deadline (`grpc-timeout`), which bounds the whole call, and when
    /// the call began (the deadline counts from there; read only for a call that has
    /// one).
    caller_deadline: Option<(Duration, Instant)>,
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
    /// A resumable stream's call (`resume`): its response tells which instance served it.
    reports_instance: bool,
    /// The call's span in a trace, whose child each attempt names in `traceparent`;
    /// `None` when the caller wrote its own `traceparent` (sent as it is).
    trace: Option<TraceContext>,
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
        for (name, value) in &stack.service_headers {
            parts.headers.insert(name.clone(), value.clone());
        }
        let config = &stack.config;
        let override_retries = parts
            .headers
            .remove(RETRIES)
            .and_then(|value| value.to_str().ok()?.trim().parse().ok());
        let method = parts.uri.path().rsplit('/').next().unwrap_or_default();
        let retries_allowed = override_retries.unwrap_or_else(|| config.retries_for(method));
        let served = CallContext::current();
        let caller_deadline =
            caller_deadline(&parts.headers, served.as_ref(), config.inherit_deadline);
        let trace = call_trace(&parts.headers, served.as_ref());
        let timeout = config.timeout_for(method);
        let idempotent = config.is_idempotent(method);
        let hash_key = stack
            .hash_header
            .as_ref()
            .and_then(|name| parts.headers.get(name))
            .map(|value| Bytes::copy_from_slice(value.as_bytes()));
        let headers = RequestHeaders::new(std::mem::take(&mut parts.headers));
        let resume = parts.extensions.remove::<ResumeAttempt>();
        let mut tried = SmallVec::new();
        if let Some(avoid) = resume.as_ref().and_then(|resume| resume.avoid.clone())
            && lists_another(&stack, &avoid)
        {
            // A stream re-opened after it moved: not back to the instance that moved it,
            // unless it is the only one (a hot upgrade's, reached on a new connection).
            tried.push(avoid);
        }
        Self {
            body: RequestBody::capture_reading_ahead(
                body,
                config.max_replay_bytes,
                config.max_replay_stream_bytes,
                read_ahead(&stack.strategy.plan(), config.max_replay_bytes),
            ),
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
            tried,
            last_failure: None,
            reports_instance: resume.is_some(),
            trace,
            unsent_resends: 0,
            overload_reroutes: 0,
        }
    }

    /// The caller's deadline (`grpc-timeout`), if it gave a valid one.
    pub(crate) fn caller_deadline(&self) -> Option<Duration> {
        self.caller_deadline.map(|(limit, _)| limit)
    }

    /// Where the call's strategy sends its attempts.
    fn plan(&self) -> Plan {
        self.stack.strategy.plan()
    }

    /// A request for one more attempt, with `body`, and how the attempt waits for its
    /// answer. The first attempt takes the request's headers and extensions (cloning
    /// them costs allocations on every call); later attempts get a copy of the headers
    /// and no extensions, as nothing below the cluster reads them.
    ///
    /// Each attempt is bounded by the configured timeout (for a request still being
    /// written, `end`'s, from when it ends) or what remains of the caller's deadline,
    /// whichever is shorter;
    /// its `grpc-timeout` says what remains of the caller's deadline, so a retry sends
    /// only that, and a provider never works on
    /// past the moment its caller stops waiting. The reference's own `timeout` is not
    /// sent: it bounds an attempt until its response head, while a provider reads
    /// `grpc-timeout` as the deadline of the whole call — a server stream would be cut
    /// at it (docs/cluster.md, "Failover").
    fn request_with(
        &mut self,
        body: TonicBody,
        end: Option<RequestEnd>,
    ) -> (Request<TonicBody>, Wait) {
        let watch_overdue = self.body.is_complete();
        let mut request = Request::new(body);
        *request.method_mut() = self.parts.method.clone();
        *request.uri_mut() = self.parts.uri.clone();
        *request.version_mut() = self.parts.version;
        *request.headers_mut() = self.headers.for_attempt();
        *request.extensions_mut() = std::mem::take(&mut self.parts.extensions);
        if let Some(trace) = &self.trace {
            // Each attempt is a span of its own under the call's.
            trace.child().write_to(request.headers_mut());
        }
        let remaining = self.remaining();
        if let Some(remaining) = remaining {
            request
                .headers_mut()
                .insert(GRPC_TIMEOUT, grpc_timeout_value(remaining));
        }
        // A request still being written (a client or bidirectional stream) is answered
        // once its caller has finished: counted from the start, the reference's
        // `timeout` would cut every upload longer than it (and tonic's handler reads a
        // cut upload as a whole one). For such an attempt it counts from the end of
        // the request.
        let after_request = end.and_then(|end| self.timeout.map(|limit| (limit, end)));
        let configured = self.timeout.filter(|_| after_request.is_none());
        let timeout = match (configured, remaining) {
            (Some(configured), Some(remaining)) => Some(configured.min(remaining)),
            (configured, remaining) => configured.or(remaining),
        };
        let wait = Wait {
            timeout,
            after_request,
            watch_overdue,
            own_trace: self.trace.is_some(),
        };
        (request, wait)
    }

    /// What remains of the caller's deadline, if it gave one.
    fn remaining(&self) -> Option<Duration> {
        self.caller_deadline
            .map(|(limit, started)| limit.saturating_sub(started.elapsed()))
    }

    /// The bound on the next attempt: the configured timeout, or what remains of the
    /// caller's deadline if that is shorter.
    fn attempt_timeout(&self) -> Option<Duration> {
        match (self.timeout, self.remaining()) {
            (Some(configured), Some(remaining)) => Some(configured.min(remaining)),
            (configured, remaining) => configured.or(remaining),
        }
    }
}

/// How much of a request body that has not ended is read when its call begins: a
/// little (it is sent as it comes) for one attempt at a time; all that is ready, up to
/// `max_replay_bytes`, for attempts sent to several instances at once, each of which
/// needs the whole body (a stream read only a little goes to one of them).
fn read_ahead(plan: &Plan, max_replay_bytes: usize) -> usize {
    match plan {
        Plan::Balanced | Plan::InOrder => crate::replay::READ_AHEAD_BYTES,
        Plan::Race(_) | Plan::All => max_replay_bytes,
    }
}

/// Whether the directory lists a live instance other than `avoid`.
fn lists_another(stack: &ReferenceStack, avoid: &InstanceId) -> bool {
    stack
        .directory
        .current()
        .invokers()
        .iter()
        .any(|invoker| invoker.id() != avoid && !invoker.is_removed())
}

/// The caller's deadline and when it was read: the shorter of the request's own
/// `grpc-timeout` and, when `inherit` (the reference's `inherit_deadline`), what remains
/// of the deadline of the call being served around it (`served`, set by the provider's
/// transport around a handler). A clock read only for a call that has one.
fn caller_deadline(
    headers: &http::HeaderMap,
    served: Option<&CallContext>,
    inherit: bool,
) -> Option<(Duration, Instant)> {
    let own = grpc_timeout(headers);
    let inherited = if inherit {
        served.and_then(CallContext::remaining)
    } else {
        None
    };
    let limit = match (own, inherited) {
        (Some(own), Some(inherited)) => own.min(inherited),
        (own, inherited) => own.or(inherited)?,
    };
    Some((limit, Instant::now()))
}

/// The call's span in a trace: under the span of the call being served around it
/// (`served`); else, when spans are exported, the first of a trace whose ids the
/// attempt's exported span replaces (`telemetry::exported_ids`). `None`, and no
/// `traceparent` written, when the caller wrote one itself (an application propagating
/// its own tracer's context: sent unchanged), and for a call in no trace at all: the
/// provider starts the trace then, and this call is spared the header's cost (about
/// 6 000 instructions of HPACK per hop, docs/observability.md).
fn call_trace(headers: &http::HeaderMap, served: Option<&CallContext>) -> Option<TraceContext> {
    if headers.contains_key(TRACEPARENT) {
        return None;
    }
    match served.and_then(CallContext::trace) {
        Some(served) => Some(served.child()),
        None => rpc_core::exported_spans::exported_spans().map(|_| TraceContext::new_root()),
    }
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
mod tests;
