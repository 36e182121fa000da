//! The seam between the ids on the wire ([`TraceContext`]) and the ids of spans an
//! exporter sends to a trace back end, so both name the same spans.
//!
//! Without an exporter, a call's ids live only on the wire, in the [`CallContext`] and in
//! log lines. With one (lossless-rpc's `otlp` feature, through tracing-opentelemetry),
//! every `tracing` span also becomes an exported span with ids of its own. The two must
//! agree, or a trace back end shows one trace per process:
//! - a provider's call span is exported with exactly the ids of its [`CallContext`],
//!   under the caller's span: the exporter's id generator reads them here
//!   ([`with_next_ids`], [`take_next_trace_id`], [`take_next_span_id`]) while
//!   [`ExportedSpans::start`] builds the span;
//! - a consumer's attempt sends the ids its exported span got ([`ExportedSpans::ids_of`]),
//!   which descend from whatever span was current (the served call's, or the
//!   application's own).
//!
//! The exporter installs itself once per process ([`export_spans_with`]); the
//! framework's crates ask [`exported_spans`]. Process-wide, as the `tracing` subscriber
//! that does the exporting is.
//!
//! [`CallContext`]: crate::CallContext

use std::cell::Cell;
use std::sync::OnceLock;

use tracing::Span;

use crate::TraceContext;

/// What an exporter of `tracing` spans does for the framework's call spans.
pub trait ExportedSpans: Send + Sync + 'static {
    /// Starts exporting `span` now, as the child of the remote span `parent` when there
    /// is one. The exporter's id generator gives it the ids set by [`with_next_ids`]
    /// around this call. Nothing when `span` is not exported.
    fn start(&self, span: &Span, parent: Option<&TraceContext>);

    /// The (trace id, span id) `span` is exported with; `None` when it is not exported.
    fn ids_of(&self, span: &Span) -> Option<(u128, u64)>;

    /// Links the deploy step's span `step` and the call's span `call` to each other,
    /// the link saying what the step did to the call ([`DEPLOY_ACTION`]). Nothing for a
    /// span that is not exported. The default links nothing.
    fn link(&self, step: &Span, call: &Span, action: DeployAction) {
        let _ = (step, call, action);
    }
}

/// What a deploy step did to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeployAction {
    /// Refused as "closing, not executed" (its consumer sends it elsewhere).
    Refused,
    /// A stream ended as moved (its consumer resumes it elsewhere).
    Moved,
}

impl DeployAction {
    /// The value of the link's `lossless_rpc.deploy.action` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::Moved => "moved",
        }
    }
}

/// The attribute of a link between a deploy step's span and a call's span.
pub const DEPLOY_ACTION: &str = "lossless_rpc.deploy.action";

static EXPORTED: OnceLock<&'static dyn ExportedSpans> = OnceLock::new();

/// Installs the exporter's side of the seam; the first one installed stays. Returns
/// whether this one was installed.
pub fn export_spans_with(spans: &'static dyn ExportedSpans) -> bool {
    EXPORTED.set(spans).is_ok()
}

/// The exporter's side of the seam, once one is installed.
pub fn exported_spans() -> Option<&'static dyn ExportedSpans> {
    EXPORTED.get().copied()
}

thread_local! {
    static NEXT_TRACE_ID: Cell<Option<u128>> = const { Cell::new(None) };
    static NEXT_SPAN_ID: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Runs `start` with `trace` as the ids the next span built on this thread takes (its
/// trace id only if it starts a trace); cleared afterwards, used or not.
pub fn with_next_ids<R>(trace: &TraceContext, start: impl FnOnce() -> R) -> R {
    NEXT_TRACE_ID.set(Some(trace.trace_id()));
    NEXT_SPAN_ID.set(Some(trace.span_id()));
    let started = start();
    NEXT_TRACE_ID.set(None);
    NEXT_SPAN_ID.set(None);
    started
}

/// The trace id set by [`with_next_ids`] for the span being built, taken (an id
/// generator's first choice; `None`: generate one).
pub fn take_next_trace_id() -> Option<u128> {
    NEXT_TRACE_ID.take()
}

/// The span id set by [`with_next_ids`] for the span being built, taken.
pub fn take_next_span_id() -> Option<u64> {
    NEXT_SPAN_ID.take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_ids_are_taken_once_and_cleared_after_the_start() {
        let trace = TraceContext::new_root();
        with_next_ids(&trace, || {
            assert_eq!(take_next_span_id(), Some(trace.span_id()));
            assert_eq!(take_next_span_id(), None, "taken once");
        });
        assert_eq!(take_next_trace_id(), None, "cleared after the start");
    }
}
