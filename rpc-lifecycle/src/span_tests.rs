//! The `tracing` spans of the lifecycle: one per start-up step and one per shutdown
//! step, each named for its step, inside one span for the whole sequence.

use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use super::*;

/// A span as seen by [`SpanLog`]: its name, its parent's name, its `outcome` field.
#[derive(Clone, Debug, Default)]
struct SeenSpan {
    name: &'static str,
    parent: Option<&'static str>,
    outcome: Option<String>,
}

/// Records every span opened while it is the default subscriber.
#[derive(Clone, Default)]
struct SpanLog {
    spans: Arc<Mutex<Vec<(Id, SeenSpan)>>>,
}

impl SpanLog {
    /// The spans whose parent is named `parent`, in the order they were opened.
    fn children_of(&self, parent: &str) -> Vec<SeenSpan> {
        let spans = self.spans.lock();
        spans
            .iter()
            .filter(|(_, span)| span.parent == Some(parent))
            .map(|(_, span)| span.clone())
            .collect()
    }
}

struct OutcomeField<'a>(&'a mut Option<String>);

impl Visit for OutcomeField<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "outcome" {
            *self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanLog
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.name());
        let seen = SeenSpan {
            name: attrs.metadata().name(),
            parent,
            outcome: None,
        };
        self.spans.lock().push((id.clone(), seen));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.spans.lock();
        if let Some((_, seen)) = spans.iter_mut().find(|(known, _)| known == id) {
            values.record(&mut OutcomeField(&mut seen.outcome));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn every_step_runs_in_a_span_named_for_it() {
    let log = SpanLog::default();
    // A second dispatcher, alive for the whole test, so that tracing-core leaves its
    // one-dispatcher fast path. On that path a callsite first reached on another test's
    // thread (these tests run in parallel, and many start a lifecycle) takes only that
    // thread's interest: no subscriber there, so "never", cached for every thread, and
    // this test's subscriber never saw the span (13 failures in 30 runs of the binary).
    // With two dispatchers registered, each callsite's interest is asked of both, under
    // tracing-core's lock, and this thread's subscriber decides what it records.
    let _second_dispatcher = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    // The test runtime has one thread: the spawned shutdown task sees this default.
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(log.clone()));
    let lifecycle = Lifecycle::new(
        "test",
        ShutdownConfig {
            internal_signal: false,
            ..ShutdownConfig::default()
        },
    );
    lifecycle.start(StartPlan::default()).await.unwrap();
    let report = lifecycle.before_shutdown().await;

    let startup: Vec<_> = log.children_of("startup").iter().map(|s| s.name).collect();
    assert_eq!(
        startup,
        ["references", "services", "readiness-gates", "register"]
    );

    let shutdown = log.children_of("shutdown");
    let names: Vec<_> = shutdown.iter().map(|span| span.name.to_owned()).collect();
    let steps: Vec<_> = report
        .steps
        .iter()
        .map(|line| line.step.to_string())
        .collect();
    assert_eq!(
        names, steps,
        "one span per step, named as the report names it"
    );
    assert_eq!(steps.len(), 7);
    for (span, line) in shutdown.iter().zip(&report.steps) {
        assert_eq!(
            span.outcome,
            Some(format!("{:?}", line.outcome)),
            "{}",
            span.name
        );
    }
}
