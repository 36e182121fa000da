//! # rpc-filter
//!
//! Tower layers that sit on the request path of `rpc`, on both sides of a call. Each is
//! an ordinary `tower::Layer`, so users can stack their own next to ours.
//!
//! - [`graceful::ProviderGracefulLayer`]: the provider side of graceful offline — counts
//!   inbound requests until their response body ends, marks responses `rpc-closing` once
//!   shutdown has begun, and refuses new requests as "closing, not executed" from step 3
//!   on.
//! - [`graceful::ConsumerGracefulLayer`]: the consumer side — counts outbound calls until
//!   their response body ends, and refuses new calls once outbound has been drained.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod graceful;
