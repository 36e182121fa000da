//! The graceful-shutdown filters, one per side of a call.
//!
//! Each gets from the lifecycle only the handles it needs (`Lifecycle::provider_handles`,
//! `Lifecycle::consumer_handles`): a phase reader, an in-flight counter, and on the
//! provider side the request clock and the rejection counter.
//!
//! Both take their guard *before* they read the phase. The shutdown sequence does the
//! reverse (it moves the phase, then waits for the counter to reach zero), so either the
//! request sees the new phase and is refused, or the drain sees the request and waits
//! for it: a request can never slip between "admitted" and "counted".

mod consumer;
mod provider;

#[cfg(test)]
mod notice_tests;

pub use consumer::{ConsumerGraceful, ConsumerGracefulLayer};
pub use provider::{ProviderGraceful, ProviderGracefulLayer, ServedBody, ServedCall};
