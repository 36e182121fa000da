//! Which cluster strategy and which load balance a reference uses.

use serde::{Deserialize, Serialize};

/// Which cluster strategy a reference uses (Dubbo's `cluster`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterKind {
    /// Retry on another instance when the request was certainly not executed (and, for
    /// idempotent methods, after timeouts and UNAVAILABLE). The default.
    #[default]
    Failover,
    /// One attempt; the error goes to the caller.
    Failfast,
    /// One attempt; an error is logged and swallowed, the caller gets an empty response.
    Failsafe,
    /// Like failsafe, and the failed request is retried in the background (bounded queue).
    Failback,
    /// `forks` attempts in parallel on different instances; the first success wins.
    Forking,
    /// Every instance is called; any error fails the call.
    Broadcast,
    /// The first selectable instance, without load balancing.
    Available,
}

/// Which load balance a reference uses (Dubbo's `loadbalance`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadBalanceKind {
    /// Weighted random.
    Random,
    /// Smooth weighted round-robin (nginx).
    #[serde(alias = "roundrobin", alias = "round-robin")]
    RoundRobin,
    /// Power of two choices over peak-EWMA latency × in-flight. The default: it needs no
    /// cooperation from the provider and steers away from slow or failing instances.
    #[default]
    P2c,
    /// Fewest calls in flight from this consumer; ties broken by weighted random.
    #[serde(alias = "leastactive", alias = "least-active")]
    LeastActive,
    /// Consistent hashing of a request metadata key (≥ 160 virtual nodes per instance).
    #[serde(
        alias = "consistenthashing",
        alias = "consistent-hash",
        alias = "consistenthash"
    )]
    ConsistentHash,
}
