//! An in-process OTLP receiver for the tests of exported spans: a tonic server
//! implementing OpenTelemetry's `TraceService` that keeps every span it is sent.

#![allow(dead_code)]

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use parking_lot::Mutex;

/// Every span the receiver was sent, and the service name of its resource.
#[derive(Clone, Default)]
pub struct Received(pub Arc<Mutex<Vec<(String, Span)>>>);

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = self.0.lock();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|resource| &resource.attributes)
                .find(|attribute| attribute.key == "service.name")
                .and_then(|attribute| text(attribute.value.as_ref()?.value.as_ref()?))
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                for span in scope_spans.spans {
                    received.push((service.clone(), span));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::StringValue(text) => Some(text.clone()),
        Value::IntValue(number) => Some(number.to_string()),
        _ => None,
    }
}

/// The value of `span`'s attribute `key`, as text.
pub fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| text(attribute.value.as_ref()?.value.as_ref()?))
}

/// Whether `span`'s attribute `key` is an integer (as the conventions type ports).
pub fn is_int(span: &Span, key: &str) -> bool {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| attribute.value.as_ref()?.value.as_ref())
        .is_some_and(|value| matches!(value, Value::IntValue(_)))
}

/// An OTLP receiver on 127.0.0.1:0, serving until the test ends.
pub async fn receiver() -> (Received, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(received.clone()))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener));
    tokio::spawn(server);
    (received, addr)
}

/// `bytes` (a trace or span id as OTLP sends it) as lowercase hex, as W3C headers and
/// other SDKs print it.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
