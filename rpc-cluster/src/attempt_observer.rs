//! What a reference tells an observer about each attempt of its calls (metrics of
//! attempt durations; `rpc` wires it to Prometheus).
//!
//! The observer sits behind an `Option` in the reference's stack: a reference without
//! one pays a single atomic load per attempt, and this crate stays free of any metrics
//! library.

use std::fmt;
use std::time::Duration;

use crate::classify::FailureKind;

/// Told of every attempt a reference's calls make, once the attempt's answer (or its
/// failure) is known. Called on the request path: an implementation must not block and
/// should not allocate.
pub trait AttemptObserver: Send + Sync + fmt::Debug + 'static {
    /// An attempt of the call to `path` (`/package.Service/Method`) ended after
    /// `duration`: from sending it to its instance until its response headers arrived
    /// (the time the P2C latency estimate sees), or until it failed. `failure` is `None`
    /// when the instance answered (a success or an application error), else how the
    /// attempt failed.
    fn attempt_ended(&self, path: &str, failure: Option<FailureKind>, duration: Duration);
}
