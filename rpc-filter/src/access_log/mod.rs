//! Access logs: one JSON line per call, on either side, written when the call ends (a
//! stream after its last message), off unless the application turns it on.
//!
//! A line (keys are OpenTelemetry's attribute names where it has one):
//!
//! ```json
//! {"timestamp":"2026-12-01T21:23:19.123Z","side":"server","application":"greeter",
//!  "rpc.system":"grpc","rpc.service":"helloworld.Greeter","rpc.method":"SayHello",
//!  "rpc.grpc.status_code":0,"duration_ms":1.234,
//!  "network.peer.address":"10.0.0.7","network.peer.port":51234}
//! ```
//!
//! `network.peer.*` is the consumer's address on a provider's line; a consumer's line
//! has none (the instance is in its attempt spans). `duration_ms` runs from the request
//! to the end of the response, as the call-duration histograms measure. The writes never
//! wait on the request path: lines go through a bounded queue to a writer task, and a
//! line that finds the queue full is dropped and counted ([`AccessLogSink::dropped`]),
//! so a slow disk costs log lines, never latency.

mod layer;
mod line;
mod sink;

pub use layer::{AccessLog, AccessLogLayer};
pub use line::LineEnd;
pub use sink::{AccessLogSink, QUEUE_LINES};
