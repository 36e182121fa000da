//! The OTLP exporter's side of `lossless_rpc_core::exported_spans`: exported spans carry
//! the ids the wire carries.
//!
//! A provider's call span is exported with the ids of its `CallContext` (the id
//! generator takes them while the span is started), under the caller's span (a remote
//! parent); a consumer's attempt sends the ids its exported span got. Without this, the
//! exported spans would have ids of the SDK's own and a trace would stop at every
//! process.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use rpc_core::TraceContext;
use rpc_core::exported_spans::{
    DEPLOY_ACTION, DeployAction, ExportedSpans, take_next_span_id, take_next_trace_id,
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The SDK's id generator: the ids set for the span being started, else random ones.
#[derive(Debug, Default)]
pub(super) struct CallIds {
    random: RandomIdGenerator,
}

impl IdGenerator for CallIds {
    fn new_trace_id(&self) -> TraceId {
        match take_next_trace_id() {
            Some(id) => TraceId::from_bytes(id.to_be_bytes()),
            None => self.random.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match take_next_span_id() {
            Some(id) => SpanId::from_bytes(id.to_be_bytes()),
            None => self.random.new_span_id(),
        }
    }
}

/// Call spans through tracing-opentelemetry's layer.
pub(super) struct OtelSpans;

impl ExportedSpans for OtelSpans {
    fn start(&self, span: &Span, parent: Option<&TraceContext>) {
        if let Some(parent) = parent {
            let flags = if parent.sampled() {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            };
            let remote = SpanContext::new(
                TraceId::from_bytes(parent.trace_id().to_be_bytes()),
                SpanId::from_bytes(parent.span_id().to_be_bytes()),
                flags,
                true,
                TraceState::default(),
            );
            // Fails only for a span the layer does not export: nothing to do then.
            let _ = span.set_parent(Context::new().with_remote_span_context(remote));
        }
        // Built now, while the ids to take are set (it would be at its first entry).
        let _ = span.context();
    }

    fn link(&self, step: &Span, call: &Span, action: DeployAction) {
        let step_context = step.context().span().span_context().clone();
        let call_context = call.context().span().span_context().clone();
        let attributes = || vec![KeyValue::new(DEPLOY_ACTION, action.as_str())];
        // Both ways: the deploy's trace lists the calls it turned away, and the call's
        // trace shows which step of which deploy did. (An invalid context, a span not
        // exported, is no link.)
        step.add_link_with_attributes(call_context, attributes());
        call.add_link_with_attributes(step_context, attributes());
    }

    fn ids_of(&self, span: &Span) -> Option<(u128, u64)> {
        let context = span.context();
        let exported = context.span().span_context().clone();
        exported.is_valid().then(|| {
            (
                u128::from_be_bytes(exported.trace_id().to_bytes()),
                u64::from_be_bytes(exported.span_id().to_bytes()),
            )
        })
    }
}
