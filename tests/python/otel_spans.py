"""OpenTelemetry's Python SDK set up to print each finished span as one JSON line on
stdout (name, kind, trace_id, span_id, parent_id as hex), for a Rust test to read; the
W3C Trace Context propagator is the SDK's default."""

import json

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class PrintedSpans(SpanExporter):
    def export(self, spans):
        for span in spans:
            parent = span.parent
            print(
                "span " + json.dumps(
                    {
                        "name": span.name,
                        "kind": span.kind.name,
                        "trace_id": format(span.context.trace_id, "032x"),
                        "span_id": format(span.context.span_id, "016x"),
                        "parent_id": format(parent.span_id, "016x") if parent else None,
                    }
                ),
                flush=True,
            )
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass


def install():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(PrintedSpans()))
    trace.set_tracer_provider(provider)
    return provider
