//! The fields of a call's span under each of OpenTelemetry's RPC conventions
//! ([`RpcConventions`]): `tracing` fixes a span's fields where its macro is written, so
//! each side has one macro per choice, and the call picks one.
//!
//! The status fields are empty at the start and recorded when the call ends
//! ([`SpanEnd`](super::SpanEnd) records every status field; a span without one ignores it).

use http::Request;
use rpc_core::semconv::{rpc_method, rpc_method_original};
use rpc_core::{CallContext, RpcConventions, TraceContext};
use tonic::transport::server::TcpConnectInfo;
use tracing::Span;
use tracing::field::Empty;

use crate::grpc_path::split_path;

/// The span of a call a consumer makes to `path`.
pub(super) fn client_span(conventions: RpcConventions, path: &str) -> Span {
    let name = path.trim_start_matches('/');
    match (conventions.emits_old(), conventions.emits_stable()) {
        (true, false) => tracing::debug_span!(
            "rpc.client",
            otel.name = name,
            otel.kind = "client",
            rpc.system = "grpc",
            rpc.service = service_of(path),
            rpc.method = method_of(path),
            rpc.grpc.status_code = Empty,
            otel.status_code = Empty,
        ),
        // `server.address` names the group of instances the call may reach: for a
        // reference that finds its providers in a registry, the service.
        (false, true) => tracing::debug_span!(
            "rpc.client",
            otel.name = name,
            otel.kind = "client",
            rpc.system.name = "grpc",
            rpc.method = rpc_method(path),
            rpc.method_original = rpc_method_original(path),
            server.address = service_of(path),
            rpc.response.status_code = Empty,
            "error.type" = Empty,
            otel.status_code = Empty,
        ),
        _ => tracing::debug_span!(
            "rpc.client",
            otel.name = name,
            otel.kind = "client",
            rpc.system = "grpc",
            rpc.system.name = "grpc",
            rpc.service = service_of(path),
            rpc.method = rpc_method(path),
            rpc.method_original = rpc_method_original(path),
            server.address = service_of(path),
            rpc.grpc.status_code = Empty,
            rpc.response.status_code = Empty,
            "error.type" = Empty,
            otel.status_code = Empty,
        ),
    }
}

/// The span of a call a provider serves, with the ids of its place in the trace.
pub(super) fn server_span<B>(conventions: RpcConventions, request: &Request<B>) -> Span {
    let path = request.uri().path();
    let name = path.trim_start_matches('/');
    // Every field below is a call, evaluated only when the span is enabled. Ports are
    // recorded as i64: tracing-opentelemetry exports an unsigned field as text, and the
    // conventions type a port as an int.
    match (conventions.emits_old(), conventions.emits_stable()) {
        (true, false) => tracing::debug_span!(
            "rpc.server",
            otel.name = name,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.service = service_of(path),
            rpc.method = method_of(path),
            network.peer.address = peer(request).map(|peer| display(peer.ip())),
            network.peer.port = peer(request).map(|peer| i64::from(peer.port())),
            rpc.grpc.status_code = Empty,
            otel.status_code = Empty,
            trace_id = trace(request).map(|trace| display(trace.trace_id_hex())),
            span_id = trace(request).map(|trace| display(trace.span_id_hex())),
            parent_span_id = parent_span_id(request),
        ),
        (false, true) => tracing::debug_span!(
            "rpc.server",
            otel.name = name,
            otel.kind = "server",
            rpc.system.name = "grpc",
            rpc.method = rpc_method(path),
            rpc.method_original = rpc_method_original(path),
            network.peer.address = peer(request).map(|peer| display(peer.ip())),
            network.peer.port = peer(request).map(|peer| i64::from(peer.port())),
            rpc.response.status_code = Empty,
            "error.type" = Empty,
            otel.status_code = Empty,
            trace_id = trace(request).map(|trace| display(trace.trace_id_hex())),
            span_id = trace(request).map(|trace| display(trace.span_id_hex())),
            parent_span_id = parent_span_id(request),
        ),
        _ => tracing::debug_span!(
            "rpc.server",
            otel.name = name,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.system.name = "grpc",
            rpc.service = service_of(path),
            rpc.method = rpc_method(path),
            rpc.method_original = rpc_method_original(path),
            network.peer.address = peer(request).map(|peer| display(peer.ip())),
            network.peer.port = peer(request).map(|peer| i64::from(peer.port())),
            rpc.grpc.status_code = Empty,
            rpc.response.status_code = Empty,
            "error.type" = Empty,
            otel.status_code = Empty,
            trace_id = trace(request).map(|trace| display(trace.trace_id_hex())),
            span_id = trace(request).map(|trace| display(trace.span_id_hex())),
            parent_span_id = parent_span_id(request),
        ),
    }
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
pub(super) fn trace<B>(request: &Request<B>) -> Option<&TraceContext> {
    request
        .extensions()
        .get::<CallContext>()
        .and_then(CallContext::trace)
}

/// The caller's span id, for a served call whose caller sent one.
fn parent_span_id<B>(request: &Request<B>) -> Option<String> {
    let id = trace(request)?.parent_span_id()?;
    Some(format!("{id:016x}"))
}

/// The address of the peer that sent `request` (set by the provider's server).
fn peer<B>(request: &Request<B>) -> Option<std::net::SocketAddr> {
    request
        .extensions()
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
}
