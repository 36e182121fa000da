//! What one attempt shows outside the cluster: a `tracing` span, a child of the call's
//! span, and a report to the reference's attempt observer (`attempt_observer.rs`).
//!
//! The span is at DEBUG level, as tower-http makes its request spans: when no subscriber
//! wants it, the macro returns a disabled span without evaluating its fields, and
//! recording into it is skipped. Its fields follow OpenTelemetry's names
//! (`server.address`, `server.port`, `rpc.grpc.status_code`, `error.type`; under the
//! stable conventions `rpc.system.name`, `rpc.method`, `rpc.response.status_code`,
//! chosen by `ClusterChannel::with_span_conventions`); the attempt
//! number follows gRPC's own OpenTelemetry design (gRFC A72), which makes one span per
//! attempt under the call's span.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rpc_core::metadata::{self, GRPC_STATUS};
use rpc_core::semconv::{rpc_method, rpc_method_original, status_name};
use tracing::Span;
use tracing::field::Empty;

use crate::classify::Outcome;
use crate::invoker::Invoker;
use crate::stack::ReferenceStack;

/// The span of attempt `number` (1 for the first) of a call to `path`, sent to `invoker`;
/// none when the reference's attempt spans are off.
pub(super) fn attempt_span(
    stack: &ReferenceStack,
    path: &str,
    invoker: &Invoker,
    number: u32,
) -> Span {
    if !stack.attempt_spans.load(Ordering::Relaxed) {
        return Span::none();
    }
    let conventions = stack.span_conventions.get().copied().unwrap_or_default();
    let name = path.trim_start_matches('/');
    let authority = invoker.authority();
    // The port as i64: an unsigned field is exported as text, the conventions want an int.
    match (conventions.emits_old(), conventions.emits_stable()) {
        (true, false) => tracing::debug_span!(
            "rpc.attempt",
            otel.name = name,
            rpc.attempt = number,
            server.address = host_of(authority),
            server.port = port_of(authority).map(i64::from),
            rpc.grpc.status_code = Empty,
            "error.type" = Empty,
            trace_id = Empty,
            span_id = Empty,
        ),
        (false, true) => tracing::debug_span!(
            "rpc.attempt",
            otel.name = name,
            rpc.system.name = "grpc",
            rpc.method = rpc_method(path),
            rpc.method_original = rpc_method_original(path),
            rpc.attempt = number,
            server.address = host_of(authority),
            server.port = port_of(authority).map(i64::from),
            rpc.response.status_code = Empty,
            "error.type" = Empty,
            trace_id = Empty,
            span_id = Empty,
        ),
        _ => tracing::debug_span!(
            "rpc.attempt",
            otel.name = name,
            rpc.system = "grpc",
            rpc.system.name = "grpc",
            rpc.method = rpc_method(path),
            rpc.method_original = rpc_method_original(path),
            rpc.attempt = number,
            server.address = host_of(authority),
            server.port = port_of(authority).map(i64::from),
            rpc.grpc.status_code = Empty,
            rpc.response.status_code = Empty,
            "error.type" = Empty,
            trace_id = Empty,
            span_id = Empty,
        ),
    }
}

/// Sends, in `request`'s `traceparent`, the ids the attempt's `span` is exported with,
/// when an exporter is installed (`lossless_rpc_core::exported_spans`): the provider's
/// span is then the exported attempt's child, in the trace of whatever span was current
/// (the served call's, or the application's own).
pub(super) fn exported_ids(span: &Span, request: &mut http::Request<tonic::body::Body>) {
    let Some(exporter) = rpc_core::exported_spans::exported_spans() else {
        return;
    };
    if span.is_disabled() {
        return;
    }
    let (Some((trace_id, span_id)), Some(sent)) = (
        exporter.ids_of(span),
        rpc_core::TraceContext::from_headers(request.headers()),
    ) else {
        return;
    };
    sent.with_ids(trace_id, span_id)
        .write_to(request.headers_mut());
}

/// Records in the attempt's `span` the trace and span ids its `request` carries on the
/// wire (`traceparent`), so its log lines join the provider's; nothing for a disabled
/// span.
pub(super) fn record_trace(span: &Span, request: &http::Request<tonic::body::Body>) {
    if span.is_disabled() {
        return;
    }
    if let Some(trace) = rpc_core::TraceContext::from_headers(request.headers()) {
        span.record("trace_id", tracing::field::display(trace.trace_id_hex()));
        span.record("span_id", tracing::field::display(trace.span_id_hex()));
    }
}

/// Reports an attempt of the call to `path` that ended with `outcome` after `took`: to
/// the reference's attempt observer, if it has one, and into the attempt's `span`.
pub(super) fn attempt_ended(
    stack: &ReferenceStack,
    path: &str,
    outcome: &Outcome,
    took: Duration,
    span: &Span,
) {
    let failure = match outcome {
        Outcome::Failure(failure) => Some(failure.kind),
        Outcome::Success(_) | Outcome::AppError(_) => None,
    };
    if let Some(observer) = stack.attempt_observer.get() {
        observer.attempt_ended(path, failure, took);
    }
    if span.is_disabled() {
        return;
    }
    // Each name is recorded if the span has it (the conventions chose its fields). An
    // attempt the cluster counts as failed is named by its kind (`rejected`, `timeout`,
    // ...: what it did next depends on it); an application's error by its status, as
    // on the call's span.
    let code = status_in_headers(outcome);
    if let Some(code) = code {
        span.record("rpc.grpc.status_code", code as i32);
        span.record("rpc.response.status_code", status_name(code));
    }
    match (failure, code) {
        (Some(kind), _) => {
            span.record("error.type", kind.as_str());
        }
        (None, Some(code)) if code != tonic::Code::Ok => {
            span.record("error.type", status_name(code));
        }
        _ => {}
    }
}

/// The gRPC status an attempt's response headers carry (a trailers-only response); a
/// response whose status comes in its trailers, or a failure without a response, has
/// none yet.
fn status_in_headers(outcome: &Outcome) -> Option<tonic::Code> {
    let response = match outcome {
        Outcome::Success(response) | Outcome::AppError(response) => response,
        Outcome::Failure(failure) => failure.response.as_ref().ok()?,
    };
    let value = metadata::header(response.headers(), &GRPC_STATUS)?;
    Some(tonic::Code::from_bytes(value.as_bytes()))
}

/// The host of `host:port` (an IPv6 host keeps its brackets off).
fn host_of(authority: &str) -> &str {
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The port of `host:port`, if it has one.
fn port_of(authority: &str) -> Option<u16> {
    authority.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(host_of("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(port_of("127.0.0.1:8080"), Some(8080));
        assert_eq!(host_of("[::1]:50051"), "::1");
        assert_eq!(port_of("[::1]:50051"), Some(50051));
        assert_eq!(host_of("provider"), "provider");
        assert_eq!(port_of("provider"), None);
    }
}
