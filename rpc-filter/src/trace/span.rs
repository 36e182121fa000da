//! The span of one call, on either side, and what it records when the call ends.

use http::Request;
use rpc_core::exported_spans::{exported_spans, with_next_ids};
use rpc_core::{CallContext, TraceContext};
use tonic::Code;
use tonic::transport::server::TcpConnectInfo;
use tracing::Span;
use tracing::field::Empty;

use crate::call_end::OnCallEnd;
use crate::grpc_path::split_path;

/// Which side of a call a span stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The provider serving the call (`otel.kind = server`).
    Server,
    /// The consumer making it (`otel.kind = client`); its attempts are child spans.
    Client,
}

/// The span of the call `request` starts on `side`. Disabled when no subscriber wants
/// DEBUG spans of this crate; its fields (the path split, the peer's address) are then
/// never evaluated.
pub fn call_span<B>(side: Side, request: &Request<B>) -> Span {
    let path = request.uri().path();
    match side {
        Side::Server => exported(server_span(request), request),
        Side::Client => tracing::debug_span!(
            "rpc.client",
            otel.name = path.trim_start_matches('/'),
            otel.kind = "client",
            rpc.system = "grpc",
            rpc.service = service_of(path),
            rpc.method = method_of(path),
            rpc.grpc.status_code = Empty,
            otel.status_code = Empty,
        ),
    }
}

/// The span of a call a provider serves, with the ids of its place in the trace.
fn server_span<B>(request: &Request<B>) -> Span {
    let path = request.uri().path();
    tracing::debug_span!(
        "rpc.server",
        otel.name = path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = service_of(path),
        rpc.method = method_of(path),
        network.peer.address = peer(request).map(|peer| tracing::field::display(peer.ip())),
        network.peer.port = peer(request).map(|peer| peer.port()),
        rpc.grpc.status_code = Empty,
        otel.status_code = Empty,
        trace_id = trace(request).map(|trace| tracing::field::display(trace.trace_id_hex())),
        span_id = trace(request).map(|trace| tracing::field::display(trace.span_id_hex())),
        parent_span_id = trace(request)
            .and_then(|trace| trace.parent_span_id())
            .map(|id| format!("{id:016x}")),
    )
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

/// The service of a gRPC path, if it is one.
fn service_of(path: &str) -> Option<&str> {
    split_path(path).map(|(service, _)| service)
}

/// The method of a gRPC path, if it is one.
fn method_of(path: &str) -> Option<&str> {
    split_path(path).map(|(_, method)| method)
}

/// The served call's span in its trace (set by the provider's transport: the caller's
/// `traceparent` continued, or a new trace).
fn trace<B>(request: &Request<B>) -> Option<&TraceContext> {
    request
        .extensions()
        .get::<CallContext>()
        .and_then(CallContext::trace)
}

/// The address of the peer that sent `request` (set by the provider's server).
fn peer<B>(request: &Request<B>) -> Option<std::net::SocketAddr> {
    request
        .extensions()
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
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
        self.span.record("rpc.grpc.status_code", code as i32);
        if is_error(self.side, code) {
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
