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
    /// `forks` attempts in parallel on different instances; the first success wins. Each
    /// fork sends the whole request: one not kept whole when the call begins (a client or
    /// bidirectional stream still being written, or any request past `max_replay_bytes`,
    /// unary included) goes to one instance only.
    Forking,
    /// Every instance is called; any error fails the call. Each is sent the whole
    /// request: one not kept whole when the call begins (a client or bidirectional stream
    /// still being written, or any request past `max_replay_bytes`, unary included) is
    /// refused with `FAILED_PRECONDITION` before anything is sent.
    Broadcast,
    /// The first selectable instance, without load balancing.
    Available,
}

/// Which load balance a reference uses (Dubbo's `loadbalance`): one of the built-in
/// ones, or one the application registered by name
/// ([`LoadBalances::register`](crate::loadbalance::LoadBalances::register)).
///
/// In configuration it is a name: `p2c`, `random`, `round_robin` (also `roundrobin`,
/// `round-robin`), `least_active` (`leastactive`, `least-active`), `consistent_hash`
/// (`consistenthashing`, `consistent-hash`, `consistenthash`), or any other name, which
/// must then be registered before the reference is built.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum LoadBalanceKind {
    /// Weighted random.
    Random,
    /// Smooth weighted round-robin (nginx).
    RoundRobin,
    /// Power of two choices over peak-EWMA latency × in-flight. The default: it needs no
    /// cooperation from the provider and steers away from slow or failing instances.
    #[default]
    P2c,
    /// Fewest calls in flight from this consumer; ties broken by weighted random.
    LeastActive,
    /// Consistent hashing of a request metadata key (≥ 160 virtual nodes per instance).
    ConsistentHash,
    /// A load balance the application registered under this name.
    Custom(String),
}

impl LoadBalanceKind {
    /// The built-in load balances.
    pub const BUILT_IN: [LoadBalanceKind; 5] = [
        Self::Random,
        Self::RoundRobin,
        Self::P2c,
        Self::LeastActive,
        Self::ConsistentHash,
    ];

    /// The name it is registered and configured under (`round_robin`, or a custom name).
    pub fn name(&self) -> &str {
        match self {
            Self::Random => "random",
            Self::RoundRobin => "round_robin",
            Self::P2c => "p2c",
            Self::LeastActive => "least_active",
            Self::ConsistentHash => "consistent_hash",
            Self::Custom(name) => name,
        }
    }

    /// The load balance a configured `name` means: a built-in one by its name or one of
    /// Dubbo's spellings, or else a custom one.
    ///
    /// # Errors
    /// An empty name, or one with characters other than ASCII letters, digits, `_`, `-`
    /// and `.`.
    pub fn from_name(name: &str) -> Result<Self, String> {
        let kind = match name {
            "random" => Self::Random,
            "round_robin" | "roundrobin" | "round-robin" => Self::RoundRobin,
            "p2c" => Self::P2c,
            "least_active" | "leastactive" | "least-active" => Self::LeastActive,
            "consistent_hash" | "consistenthashing" | "consistent-hash" | "consistenthash" => {
                Self::ConsistentHash
            }
            custom => {
                let valid = !custom.is_empty()
                    && custom
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
                if !valid {
                    return Err(format!(
                        "`{custom}` is not a load balance name (letters, digits, `_`, `-`, `.`)"
                    ));
                }
                Self::Custom(custom.to_owned())
            }
        };
        Ok(kind)
    }
}

impl std::fmt::Display for LoadBalanceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for LoadBalanceKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for LoadBalanceKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Self::from_name(&name).map_err(serde::de::Error::custom)
    }
}
