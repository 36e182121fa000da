//! The span of one call, on either side, and what it records when the call ends.

use http::Request;
use rpc_core::RpcConventions;
use rpc_core::exported_spans::{exported_spans, with_next_ids};
use rpc_core::semconv::status_name;
use tonic::Code;
use tracing::Span;

use super::span_fields::{client_span, server_span, trace};
use crate::call_end::OnCallEnd;

/// Which side of a call a span stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The provider serving the call (`otel.kind = server`).
    Server,
    /// The consumer making it (`otel.kind = client`); its attempts are child spans.
    Client,
}

/// The span of the call `request` starts on `side`, with the attribute names
/// `conventions` chooses. Disabled when no subscriber wants DEBUG spans of this crate;
/// its fields (the path split, the peer's address) are then never evaluated.
pub fn call_span<B>(side: Side, conventions: RpcConventions, request: &Request<B>) -> Span {
    match side {
        Side::Server => exported(server_span(conventions, request), request),
        Side::Client => client_span(conventions, request.uri().path()),
    }
}

/// `span`, exported (when an exporter is installed) with exactly the ids of the served
/// call's `CallContext`, as the child of the caller's span: the trace back end then
/// shows the same ids as the wire and the logs (`lossless_rpc_core::exported_spans`).
fn exported<B>(span: Span, request: &Request<B>) -> Span {
    let (Some(exporter), Some(trace)) = (exported_spans(), trace(request)) else {
        return span;
    };
    if !span.is_disabled() {
        with_next_ids(trace, || exporter.start(&span, trace.parent().as_ref()));
    }
    span
}

/// A call's span, waiting for the call's end to record its status.
#[derive(Debug)]
pub struct SpanEnd {
    span: Span,
    side: Side,
}

impl SpanEnd {
    /// Records the end of the call `span` stands for on `side`; `None` when the span is
    /// disabled, so a call nobody traces carries nothing to its end.
    pub fn new(span: &Span, side: Side) -> Option<Self> {
        (!span.is_disabled()).then(|| Self {
            span: span.clone(),
            side,
        })
    }
}

impl OnCallEnd for SpanEnd {
    fn call_ended(self, code: Code) {
        // Each name is recorded if the span has it (the conventions chose its fields).
        self.span.record("rpc.grpc.status_code", code as i32);
        self.span
            .record("rpc.response.status_code", status_name(code));
        if is_error(self.side, code) {
            self.span.record("error.type", status_name(code));
            self.span.record("otel.status_code", "ERROR");
        }
    }

    fn in_scope<R>(&self, poll: impl FnOnce() -> R) -> R {
        self.span.in_scope(poll)
    }
}

/// Whether a call that ended with `code` failed, as OpenTelemetry's RPC conventions say:
/// every code but OK on the client; on the server only the codes that mean the server
/// failed (an INVALID_ARGUMENT or NOT_FOUND is the caller's doing).
fn is_error(side: Side, code: Code) -> bool {
    match side {
        Side::Client => code != Code::Ok,
        Side::Server => matches!(
            code,
            Code::Unknown
                | Code::DeadlineExceeded
                | Code::Unimplemented
                | Code::Internal
                | Code::Unavailable
                | Code::DataLoss
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_fail_only_for_their_own_faults() {
        assert!(is_error(Side::Client, Code::NotFound));
        assert!(!is_error(Side::Server, Code::NotFound));
        assert!(is_error(Side::Server, Code::Unavailable));
        assert!(!is_error(Side::Client, Code::Ok));
    }
}
