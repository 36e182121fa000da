//! What a provider knows of the call it serves, for the calls its handler makes in turn:
//! its deadline and its place in a trace.
//!
//! A chain of calls (client → gateway → service → service) shares one deadline: when
//! the first caller stops waiting, every hop behind it should stop too, and no hop
//! should start work that cannot finish in time. gRPC carries the deadline on the wire
//! (`grpc-timeout`), but only from a caller to its callee; what a handler has left must
//! reach the calls it makes itself. grpc-go passes a `context.Context` by hand, Dubbo 3
//! an attachment; here the provider's transport sets a [`CallContext`] around the
//! handler's future (a tokio task-local), and every reference call made from inside
//! that future reads it. Nothing is passed by hand.
//!
//! The context reaches what runs *inside the handler's future*. A task the handler
//! spawns does not inherit it (tokio's task-locals are per task): carry it with
//! [`CallContext::current`] and [`CallContext::scope`]. A server-streaming handler's
//! stream is polled by the response body, outside the future, and sees no context
//! either.

use std::future::Future;
use std::time::Duration;

use tokio::task::futures::TaskLocalFuture;
use tokio::time::Instant;

use crate::TraceContext;

tokio::task_local! {
    static CURRENT: CallContext;
}

/// The context of the call a provider serves: its deadline, from the caller's
/// `grpc-timeout`, and its span in the caller's trace (`traceparent`, see
/// [`TraceContext`]). Read by every reference call made inside the handler: it sends
/// only what remains of the deadline, capped by its own timeout (unless the reference
/// opts out with `inherit_deadline: false`), and continues the trace.
///
/// ```
/// use std::time::Duration;
/// use lossless_rpc_core::CallContext;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let context = CallContext::new().with_deadline(Instant::now() + Duration::from_secs(1));
/// context.scope(async {
///     let left = CallContext::current().and_then(|served| served.remaining());
///     assert!(left.is_some_and(|left| left <= Duration::from_secs(1)));
/// }).await;
/// assert!(CallContext::current().is_none(), "outside the scope: no call is served");
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallContext {
    deadline: Option<Instant>,
    trace: Option<TraceContext>,
}

impl CallContext {
    /// A context with no deadline.
    pub fn new() -> Self {
        Self::default()
    }

    /// This context with `deadline` (tokio's clock, so tests may pause it).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// This context with `trace`: the served call's span.
    pub fn with_trace(mut self, trace: TraceContext) -> Self {
        self.trace = Some(trace);
        self
    }

    /// The context of the call being served by the current task's future, if any: set by
    /// the provider's transport around each handler, or by [`CallContext::scope`].
    pub fn current() -> Option<Self> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// The deadline of the served call the calling code runs in, if it has one (no copy
    /// of the context, as [`CallContext::current`] makes).
    pub fn current_deadline() -> Option<Instant> {
        CURRENT.try_with(|context| context.deadline).ok().flatten()
    }

    /// The trace and span ids of the served call the calling code runs in, when it runs
    /// in one whose trace is sampled (no copy of the context, as [`CallContext::current`]
    /// makes).
    pub fn current_ids() -> Option<(u128, u64)> {
        CURRENT.try_with(Self::sampled_ids).ok().flatten()
    }

    /// This call's trace and span ids, when its trace is sampled.
    pub fn sampled_ids(&self) -> Option<(u128, u64)> {
        let trace = self.trace.as_ref().filter(|trace| trace.sampled())?;
        Some((trace.trace_id(), trace.span_id()))
    }

    /// The served call's span in its trace: a child of the caller's span, or the first
    /// of a new trace when the caller sent no valid `traceparent`.
    pub fn trace(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// When the caller stops waiting, if it said (`grpc-timeout`).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// What remains until the deadline, zero once it has passed; `None` without one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// `future`, run with this context as [`CallContext::current`]: how a handler hands
    /// its deadline to a task it spawns.
    pub fn scope<F: Future>(self, future: F) -> TaskLocalFuture<CallContext, F> {
        CURRENT.scope(self, future)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_remaining_time_shrinks_with_the_clock_and_stops_at_zero() {
        let context = CallContext::new().with_deadline(Instant::now() + Duration::from_millis(300));
        context
            .scope(async {
                tokio::time::advance(Duration::from_millis(200)).await;
                let served = CallContext::current().expect("inside the scope");
                assert_eq!(served.remaining(), Some(Duration::from_millis(100)));
                tokio::time::advance(Duration::from_millis(200)).await;
                assert_eq!(served.remaining(), Some(Duration::ZERO));
            })
            .await;
    }

    #[tokio::test]
    async fn a_spawned_task_has_no_context_unless_it_is_carried() {
        let context = CallContext::new().with_deadline(Instant::now() + Duration::from_secs(5));
        context
            .scope(async {
                let lost = tokio::spawn(async { CallContext::current() })
                    .await
                    .unwrap();
                assert_eq!(lost, None);
                let carried = CallContext::current().unwrap();
                let kept = tokio::spawn(carried.scope(async { CallContext::current() }))
                    .await
                    .unwrap();
                assert_eq!(kept, CallContext::current());
                assert!(kept.is_some());
            })
            .await;
        assert_eq!(CallContext::new().remaining(), None);
    }
}
