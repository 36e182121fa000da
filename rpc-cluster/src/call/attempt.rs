//! One attempt, down the layers to its instance and back up: dispatch it inside its
//! span (`dispatch.rs`, `telemetry.rs`), learn from its result (`learn.rs`), then tell the
//! span and the attempt observer how it went; a dial it left overdue is finished in the
//! background (`slow_dial.rs`). It takes only what the attempt needs, not the call.

use std::sync::Arc;

use http::Request;
use rand::rngs::SmallRng;
use tonic::body::Body as TonicBody;
use tracing::Instrument;

use super::dispatch::Wait;
use super::{dispatch, learn, slow_dial, telemetry};
use crate::classify::Outcome;
use crate::invoker::Invoker;
use crate::stack::ReferenceStack;

/// Where one attempt goes, and which of its call's attempts it is.
pub(super) struct Target<'a> {
    pub(super) invoker: &'a Arc<Invoker>,
    /// The call's path, `/package.Service/Method`.
    pub(super) path: &'a str,
    /// 1 for the call's first attempt, counting re-routed ones.
    pub(super) number: u32,
}

/// One attempt on `target`, down to the instance and back up: dispatch it inside its
/// span, learn from its result, then tell the span and the observer how it went.
pub(super) async fn attempt(
    stack: &Arc<ReferenceStack>,
    target: Target<'_>,
    request: Request<TonicBody>,
    wait: Wait,
    rng: &mut SmallRng,
) -> Outcome {
    let invoker = target.invoker;
    let span = telemetry::attempt_span(stack, target.path, invoker, target.number);
    let mut request = request;
    if wait.own_trace {
        telemetry::exported_ids(&span, &mut request);
    }
    telemetry::record_trace(&span, &request);
    let mut dispatched = dispatch::dispatch(invoker, request, wait)
        .instrument(span.clone())
        .await;
    let (blacklist, directory) = (&stack.blacklist, &stack.directory);
    let took = learn::learn(blacklist, directory, invoker, &dispatched, rng);
    telemetry::attempt_ended(stack, target.path, &dispatched.outcome, took, &span);
    if let Some(suspicion) = dispatched.left_dial.take() {
        slow_dial::finish_in_background(stack, invoker, suspicion);
    }
    dispatched.into_outcome()
}
