//! One call's access-log line, written when the call ends.

use std::net::SocketAddr;
use std::time::SystemTime;

use serde_json::{Map, Value};
use tokio::time::Instant;
use tonic::Code;

use super::sink::AccessLogSink;
use crate::call_end::OnCallEnd;
use crate::grpc_path::split_path;
use crate::trace::Side;

/// What a call's line needs at its end: known from the request, completed by the
/// status and the duration.
#[derive(Debug)]
pub struct LineEnd {
    sink: AccessLogSink,
    application: std::sync::Arc<str>,
    side: Side,
    path: Box<str>,
    peer: Option<SocketAddr>,
    started: Instant,
    at: SystemTime,
    trace_id: Option<u128>,
}

impl LineEnd {
    /// The line of a call to `path` starting now, from `peer` (a provider's caller).
    pub fn start(
        sink: AccessLogSink,
        application: std::sync::Arc<str>,
        side: Side,
        path: &str,
        peer: Option<SocketAddr>,
    ) -> Self {
        Self {
            sink,
            application,
            side,
            path: path.into(),
            peer,
            started: Instant::now(),
            at: SystemTime::now(),
            trace_id: None,
        }
    }

    /// This line with the id of the trace its call belongs to (`trace_id`, 32 hex
    /// digits, as trace back ends show it), when known.
    pub fn with_trace_id(mut self, trace_id: Option<u128>) -> Self {
        self.trace_id = trace_id;
        self
    }

    /// The line as JSON, for a call that ended with `code`.
    fn line(&self, code: Code) -> String {
        let mut line = Map::new();
        let timestamp = humantime::format_rfc3339_millis(self.at).to_string();
        line.insert("timestamp".into(), Value::from(timestamp));
        let side = match self.side {
            Side::Server => "server",
            Side::Client => "client",
        };
        line.insert("side".into(), Value::from(side));
        line.insert("application".into(), Value::from(&*self.application));
        line.insert("rpc.system".into(), Value::from("grpc"));
        match split_path(&self.path) {
            Some((service, method)) => {
                line.insert("rpc.service".into(), Value::from(service));
                line.insert("rpc.method".into(), Value::from(method));
            }
            // Not a gRPC path (a scanner, a typo): the line says what was asked.
            None => {
                line.insert("url.path".into(), Value::from(&*self.path));
            }
        }
        line.insert("rpc.grpc.status_code".into(), Value::from(code as i32));
        let millis = self.started.elapsed().as_secs_f64() * 1000.0;
        line.insert(
            "duration_ms".into(),
            Value::from((millis * 1000.0).round() / 1000.0),
        );
        if let Some(peer) = self.peer {
            line.insert(
                "network.peer.address".into(),
                Value::from(peer.ip().to_string()),
            );
            line.insert("network.peer.port".into(), Value::from(peer.port()));
        }
        if let Some(trace_id) = self.trace_id {
            line.insert("trace_id".into(), Value::from(format!("{trace_id:032x}")));
        }
        Value::Object(line).to_string()
    }
}

impl OnCallEnd for LineEnd {
    fn call_ended(self, code: Code) {
        let line = self.line(code);
        self.sink.write(line);
    }
}
