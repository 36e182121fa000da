//! The dial an attempt left when its answer was overdue (`dispatch.rs`): it goes on in
//! a task of its own, with the instance suspected (no call picks it but a panic-mode
//! one) until the dial ends. A connection that answers a PING lifts the suspicion; a
//! dial that got no answer within the connect timeout ejects the instance at once, as
//! an attempt's own would have (`learn.rs`); any other failure counts as one.
//!
//! Without this, the first call to an instance this consumer had no connection to —
//! new to it, as after the consumer's restart — waited for the dial up to the connect
//! timeout when the host was paused or gone, though other instances could answer at
//! once (the fleet simulator's seed 2232).

use std::sync::Arc;

use tokio::time::Instant;

use crate::classify::classify_error;
use crate::invoker::{Invoker, Suspicion};
use crate::stack::ReferenceStack;

/// Finishes `invoker`'s dial in the background, holding `suspicion` until it ends
/// (bounded by the connect timeout and the probe timeout), or until the invoker is
/// destroyed.
pub(super) fn finish_in_background(
    stack: &Arc<ReferenceStack>,
    invoker: &Arc<Invoker>,
    suspicion: Suspicion,
) {
    let Some(channel) = invoker.channel() else {
        return;
    };
    let (stack, invoker) = (stack.clone(), invoker.clone());
    tokio::spawn(async move {
        let checked = tokio::select! {
            checked = channel.check() => checked,
            () = invoker.destroyed().cancelled() => return,
        };
        if let Err(error) = checked {
            learn_failed_dial(&stack, &invoker, error);
        }
        // Only now: a pick between the ejection and this would have reached the host.
        drop(suspicion);
    });
}

/// What a dial that failed teaches: ejection at once when the host never answered,
/// one failure otherwise (refused, reset, a PING unanswered after a late connection).
fn learn_failed_dial(stack: &ReferenceStack, invoker: &Arc<Invoker>, error: rpc_core::BoxError) {
    let failure = classify_error(error, false);
    let peers = stack.directory.current();
    let now = Instant::now();
    let mut rng = stack.rngs.for_call();
    tracing::debug!(instance = %invoker.id(), error = %failure.summary(), "dial left by an overdue call failed");
    if failure.dial_timed_out() {
        let reason = "no connection within the connect timeout";
        stack
            .blacklist
            .on_unresponsive(invoker, peers.invokers(), now, &mut rng, reason);
    } else {
        stack
            .blacklist
            .on_failure(invoker, peers.invokers(), now, &mut rng);
    }
}
