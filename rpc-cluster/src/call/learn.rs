//! What one attempt teaches about its instance: its health (the blacklist's ejection
//! policy, closing marks), its latency estimate (for P2C) and its failure record.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use tokio::time::Instant;

use super::dispatch::Dispatched;
use crate::blacklist::Blacklist;
use crate::classify::{FailureKind, Outcome, says_closing};
use crate::directory::Directory;
use crate::invoker::Invoker;

/// Feeds the outcome of an attempt `dispatched` to `invoker` to the instance's record,
/// its latency estimate and the `blacklist`; `directory` gives the failure penalty and
/// the peers an ejection is weighed against, `rng` an ejection's jitter.
///
/// A success or an application error is a healthy answer. A closing provider's refusal
/// marks the instance closing and counts nothing against it; it (and a refused
/// connection) also ends the instance's use as the directory's last resort. Any other failure counts
/// toward ejection and enters the latency estimate as at least the failure penalty, so
/// an instance that fails fast does not look fast to P2C. A connection that did not
/// answer the PING of an overdue call, or a dial that got no answer within the connect
/// timeout, ejects the instance at once: that is proof, not a streak of doubtful
/// failures (otherwise every call picked after a dial to a paused host timed out
/// dialled it again and waited the connect timeout once more; the fleet simulator
/// found it, seed 20).
///
/// Returns how long the attempt took, from its start to its result.
pub(super) fn learn(
    blacklist: &Blacklist,
    directory: &Directory,
    invoker: &Arc<Invoker>,
    dispatched: &Dispatched,
    rng: &mut SmallRng,
) -> Duration {
    let now = Instant::now();
    let rtt = now - dispatched.started;
    let outcome = &dispatched.outcome;
    let dial_timed_out = matches!(outcome, Outcome::Failure(failure) if failure.dial_timed_out());
    if dispatched.unresponsive || dial_timed_out {
        let peers = directory.current();
        let reason = if dial_timed_out {
            "no connection within the connect timeout"
        } else {
            "PING unanswered"
        };
        blacklist.on_unresponsive(invoker, peers.invokers(), now, rng, reason);
    }
    let response = match outcome {
        Outcome::Success(response) | Outcome::AppError(response) => {
            invoker.note_result(false, now);
            invoker.observe_latency(rtt, now);
            blacklist.on_success(invoker, now);
            Some(response)
        }
        // An overloaded instance is healthy and stays in service: nothing is held
        // against it, and its quick refusal does not enter its latency estimate (it
        // would make it look fast).
        Outcome::Failure(failure) if failure.kind == FailureKind::Overloaded => {
            failure.response.as_ref().ok()
        }
        Outcome::Failure(failure) => {
            invoker.note_result(true, now);
            if matches!(failure.kind, FailureKind::Rejected | FailureKind::NotSent) {
                directory.refused_by(invoker);
            }
            if failure.kind == FailureKind::Rejected {
                blacklist.mark_closing(invoker, directory.current().invokers(), now);
            } else {
                let penalty = directory.config().failure_penalty;
                invoker.observe_penalty(rtt.max(penalty), now);
                let peers = directory.current();
                blacklist.on_failure(invoker, peers.invokers(), now, rng);
            }
            failure.response.as_ref().ok()
        }
    };
    if response.is_some_and(says_closing) {
        blacklist.mark_closing(invoker, directory.current().invokers(), now);
    }
    rtt
}
