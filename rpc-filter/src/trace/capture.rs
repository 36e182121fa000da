//! A subscriber layer for tests that keeps every span's fields and every event's span.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The fields of one span, by name, as text.
pub(crate) type Fields = BTreeMap<String, String>;

/// Spans by id, with their name and fields, in creation order.
type SpanLog = Vec<(Id, String, Fields)>;

/// Event messages, with the name of the span each happened in.
type EventLog = Vec<(String, Option<String>)>;

/// What was traced: spans (name and fields) in creation order, and each event's message
/// with the name of the span it happened in.
#[derive(Clone, Default)]
pub(crate) struct Captured {
    spans: Arc<Mutex<SpanLog>>,
    events: Arc<Mutex<EventLog>>,
}

impl Captured {
    /// Every span, in creation order.
    pub(crate) fn spans(&self) -> Vec<(String, Fields)> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .map(|(_, name, fields)| (name.clone(), fields.clone()))
            .collect()
    }

    /// The fields of the first span called `name`.
    pub(crate) fn span(&self, name: &str) -> Fields {
        self.spans()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no span {name}"))
            .1
    }

    /// The span the event with `message` happened in.
    pub(crate) fn event_span(&self, message: &str) -> Option<String> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .find(|(m, _)| m == message)
            .and_then(|(_, span)| span.clone())
    }
}

struct Text<'a>(&'a mut Fields);

impl Visit for Text<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Captured {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Text(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.spans.lock().unwrap().push((id.clone(), name, fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some((_, _, fields)) = spans.iter_mut().rev().find(|(i, _, _)| i == id) {
            values.record(&mut Text(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Text(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        let span = ctx.event_span(event).map(|span| span.name().to_owned());
        self.events.lock().unwrap().push((message, span));
    }
}
