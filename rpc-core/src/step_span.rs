//! The span of the shutdown or upgrade step running now, so that a call the step refused
//! or moved and the step itself point at each other in a trace.
//!
//! A deploy is seen from two sides: the call's trace (its consumer retried elsewhere;
//! why?) and the deploy's own spans (`shutdown` → `reject-new`, `upgrade` → `drain`).
//! When the provider's filter refuses a call as "closing, not executed" or a stream ends
//! as moved, [`StepSpan::link_current_call`] joins the two: with an exporter, the step's
//! span and the call's span get a span link to each other (attribute
//! `lossless_rpc.deploy.action`: `refused` or `moved`, a [`DeployAction`]); without one,
//! the call's span gets an event naming the step, so its log lines say why it ended.

use std::sync::Arc;

use parking_lot::Mutex;
use tracing::Span;

use crate::exported_spans::{DeployAction, exported_spans};

/// The span of the lifecycle step running now, if any. Written by the lifecycle as each
/// step begins and ends; read only when a call is refused or moved (a lock then, none on
/// any other call). Cheap to clone; clones share the span.
#[derive(Clone, Debug, Default)]
pub struct StepSpan {
    current: Arc<Mutex<Option<Span>>>,
}

impl StepSpan {
    /// No step running.
    pub fn new() -> Self {
        Self::default()
    }

    /// `span` is the running step's, until [`StepSpan::ended`].
    pub fn began(&self, span: &Span) {
        *self.current.lock() = Some(span.clone());
    }

    /// No step runs any more.
    pub fn ended(&self) {
        *self.current.lock() = None;
    }

    /// The running step's span, if any.
    pub fn current(&self) -> Option<Span> {
        self.current.lock().clone()
    }

    /// Joins the call whose span is current (the provider's call span, current while
    /// its filters run) and the running step: span links both ways when an exporter is
    /// installed, and an event in the call's span naming the step. Nothing when no
    /// step runs or the call has no span.
    pub fn link_current_call(&self, action: DeployAction) {
        let Some(step) = self.current() else {
            return;
        };
        let call = Span::current();
        if call.is_none() {
            return;
        }
        if let Some(exporter) = exported_spans() {
            exporter.link(&step, &call, action);
        }
        let step_name = step.metadata().map_or("", |metadata| metadata.name());
        call.in_scope(|| {
            tracing::debug!(
                step = step_name,
                action = action.as_str(),
                "the call met a deploy step"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_current_from_its_beginning_to_its_end() {
        let step_span = StepSpan::new();
        assert!(step_span.current().is_none());
        // Nothing to link and nothing panics with no step and no call span.
        step_span.link_current_call(DeployAction::Refused);
        step_span.clone().began(&Span::none());
        assert!(step_span.current().is_some(), "clones share the step");
        step_span.ended();
        assert!(step_span.current().is_none());
    }
}
