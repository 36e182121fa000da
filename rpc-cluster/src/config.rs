//! Configuration of references, the directory and the blacklist, with the defaults
//! Dubbo users expect. Every struct denies unknown keys so a typo is an error that
//! names it, and accepts dubbo-go's kebab-case spellings as aliases.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A setting whose value is out of range: `key` is relative to the section checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSetting {
    /// The key, relative to the checked section (`timeout`, `methods.Get.timeout`).
    pub key: String,
    /// What is wrong, with the allowed range.
    pub reason: String,
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Result<(), InvalidSetting> {
    Err(InvalidSetting {
        key: key.into(),
        reason: reason.into(),
    })
}

fn positive(key: &str, value: Option<Duration>) -> Result<(), InvalidSetting> {
    match value {
        Some(value) if value.is_zero() => {
            invalid(key, "must be more than 0 (leave it out for none)")
        }
        _ => Ok(()),
    }
}

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

/// Per-method settings, under `references.<service>.methods.<Method>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MethodConfig {
    /// Whether the method may run twice safely; only then are timeouts and UNAVAILABLE
    /// retried. Default: the reference's `idempotent`.
    pub idempotent: Option<bool>,
    /// Overrides the reference's `retries` for this method.
    pub retries: Option<u32>,
    /// Overrides the reference's `timeout` for this method.
    #[serde(with = "humantime_serde::option")]
    pub timeout: Option<Duration>,
}

/// Settings of one reference, under `consumer.references.<service>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReferenceConfig {
    /// Cluster strategy. Default `failover`.
    pub cluster: ClusterKind,
    /// Load balance. Default `p2c`.
    pub loadbalance: LoadBalanceKind,
    /// Extra attempts of `failover` (at most `1 + retries` attempts). Default 2;
    /// 0 means exactly one attempt. Overridden per call by the `rpc-retries` header.
    pub retries: u32,
    /// Bound on each attempt, until the response headers arrive. Default 3 s (Dubbo's
    /// meaning: per attempt, so a retry gets a full timeout). `grpc-timeout` set by the
    /// caller lowers it.
    #[serde(with = "humantime_serde::option")]
    pub timeout: Option<Duration>,
    /// Whether every method of the service is idempotent. Default false.
    pub idempotent: bool,
    /// Per-method overrides, by method name (`SayHello`).
    pub methods: BTreeMap<String, MethodConfig>,
    /// Slow start: an instance's weight ramps up linearly over this long from when this
    /// consumer first saw it. Default off.
    #[serde(with = "humantime_serde::option")]
    pub warmup: Option<Duration>,
    /// Parallel attempts of `forking`. Default 2.
    pub forks: usize,
    /// Request header hashed by `consistent_hash`. Default `rpc-hash-key`.
    #[serde(alias = "hash-key")]
    pub hash_key: String,
    /// Group of the referenced service. Default none.
    pub group: String,
    /// Version of the referenced service. Default none.
    pub version: String,
    /// Overrides `consumer.check` for this reference.
    pub check: Option<bool>,
    /// Smallest backoff before a retry (full jitter, doubling per attempt). Default 2 ms.
    #[serde(with = "humantime_serde", alias = "backoff-base")]
    pub backoff_base: Duration,
    /// Largest backoff before a retry. Default 50 ms.
    #[serde(with = "humantime_serde", alias = "backoff-max")]
    pub backoff_max: Duration,
    /// Largest request body buffered for replay on retry, in bytes. Default 4 MiB
    /// (gRPC's default message limit). Larger requests are sent once.
    #[serde(alias = "max-replay-bytes")]
    pub max_replay_bytes: usize,
}

impl Default for ReferenceConfig {
    fn default() -> Self {
        Self {
            cluster: ClusterKind::default(),
            loadbalance: LoadBalanceKind::default(),
            retries: 2,
            timeout: Some(Duration::from_secs(3)),
            idempotent: false,
            methods: BTreeMap::new(),
            warmup: None,
            forks: 2,
            hash_key: rpc_core::metadata::HASH_KEY.as_str().to_owned(),
            group: String::new(),
            version: String::new(),
            check: None,
            backoff_base: Duration::from_millis(2),
            backoff_max: Duration::from_millis(50),
            max_replay_bytes: 4 * 1024 * 1024,
        }
    }
}

impl ReferenceConfig {
    /// Whether `method` (the name, e.g. `SayHello`) is idempotent.
    pub fn is_idempotent(&self, method: &str) -> bool {
        self.method(method)
            .and_then(|m| m.idempotent)
            .unwrap_or(self.idempotent)
    }

    /// The retries configured for `method`.
    pub fn retries_for(&self, method: &str) -> u32 {
        self.method(method)
            .and_then(|m| m.retries)
            .unwrap_or(self.retries)
    }

    /// The per-attempt timeout configured for `method`.
    pub fn timeout_for(&self, method: &str) -> Option<Duration> {
        self.method(method).and_then(|m| m.timeout).or(self.timeout)
    }

    /// Checks the values serde cannot: ranges and relations between settings.
    ///
    /// # Errors
    /// The first [`InvalidSetting`] found.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        positive("timeout", self.timeout)?;
        for (name, method) in &self.methods {
            positive(&format!("methods.{name}.timeout"), method.timeout)?;
        }
        if self.forks == 0 {
            invalid("forks", "must be at least 1")?;
        }
        if self.backoff_base > self.backoff_max {
            invalid("backoff_base", "must not be more than backoff_max")?;
        }
        if http::HeaderName::try_from(self.hash_key.as_str()).is_err() {
            invalid(
                "hash_key",
                format!(
                    "`{}` is not a valid header name (lower-case letters, digits, `-`)",
                    self.hash_key
                ),
            )?;
        }
        Ok(())
    }

    fn method(&self, method: &str) -> Option<&MethodConfig> {
        if self.methods.is_empty() {
            return None;
        }
        self.methods.get(method)
    }
}

/// Outlier ejection (the blacklist), under `consumer.blacklist`. Defaults follow gRPC's
/// outlier detection (A50) and Envoy: 5 consecutive failures, 30 s × times ejected,
/// capped at 300 s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BlacklistConfig {
    /// Whether instances are ejected at all. Default true.
    pub enabled: bool,
    /// Connection-level failures in a row (refused, reset, UNAVAILABLE, timeout) that
    /// eject an instance. Application errors never count. Default 5.
    #[serde(alias = "consecutive-failures")]
    pub consecutive_failures: u32,
    /// Ejection time of a first ejection; the n-th ejection lasts n times this.
    /// Default 30 s.
    #[serde(with = "humantime_serde", alias = "base-ejection-time")]
    pub base_ejection_time: Duration,
    /// Longest ejection. Default 300 s.
    #[serde(with = "humantime_serde", alias = "max-ejection-time")]
    pub max_ejection_time: Duration,
    /// At most this percentage of instances is ejected at once (at least one may
    /// always be). Default 50.
    #[serde(alias = "max-ejection-percent")]
    pub max_ejection_percent: u32,
    /// Random extra ejection time, as a fraction of the ejection time, so ejected
    /// instances do not all return at once. Default 0.1.
    pub jitter: f64,
}

impl BlacklistConfig {
    /// Checks ranges serde cannot.
    ///
    /// # Errors
    /// The first [`InvalidSetting`] found.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.consecutive_failures == 0 {
            invalid("consecutive_failures", "must be at least 1")?;
        }
        if self.max_ejection_percent > 100 {
            invalid("max_ejection_percent", "must be 0..=100")?;
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            invalid(
                "jitter",
                "must be 0.0..=1.0 (a fraction of the ejection time)",
            )?;
        }
        if self.base_ejection_time > self.max_ejection_time {
            invalid(
                "base_ejection_time",
                "must not be more than max_ejection_time",
            )?;
        }
        Ok(())
    }
}

impl Default for BlacklistConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            consecutive_failures: 5,
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 50,
            jitter: 0.1,
        }
    }
}

/// How the directory treats registry notifications, under `consumer`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectoryConfig {
    /// Keep the last known instances when the registry delivers an empty set because
    /// of a fault (an authoritative empty set — the last instance left — is applied).
    /// Default true.
    #[serde(alias = "empty-protection")]
    pub empty_protection: bool,
    /// How long a removed or closing instance may keep its connection for calls in
    /// flight; calls still running after that are cancelled. Default 30 s.
    #[serde(with = "humantime_serde", alias = "closing-invoker-expire-time")]
    pub closing_invoker_expire_time: Duration,
    /// Latency assumed for an instance before its first response (P2C). The estimate
    /// decays toward observed latencies, so a new instance is eased in rather than
    /// flooded. Default 5 ms (tower's is 30 ms, tuned for wider networks; on a LAN that
    /// kept new instances nearly idle for half a minute).
    #[serde(with = "humantime_serde", alias = "default-rtt")]
    pub default_rtt: Duration,
    /// Latency a failed call counts as in the peak-EWMA estimate (P2C), so an instance
    /// that fails fast does not look fast. Default 1 s.
    #[serde(with = "humantime_serde", alias = "failure-penalty")]
    pub failure_penalty: Duration,
    /// Decay time of the peak-EWMA estimate. Default 10 s (linkerd's).
    #[serde(with = "humantime_serde", alias = "ewma-decay")]
    pub ewma_decay: Duration,
}

impl DirectoryConfig {
    /// Checks ranges serde cannot.
    ///
    /// # Errors
    /// The first [`InvalidSetting`] found.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        positive("ewma_decay", Some(self.ewma_decay))?;
        positive(
            "closing_invoker_expire_time",
            Some(self.closing_invoker_expire_time),
        )
    }
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        Self {
            empty_protection: true,
            closing_invoker_expire_time: Duration::from_secs(30),
            default_rtt: Duration::from_millis(5),
            failure_penalty: Duration::from_secs(1),
            ewma_decay: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_dubbo_like() {
        let config: ReferenceConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(config.cluster, ClusterKind::Failover);
        assert_eq!(config.retries, 2);
        assert_eq!(config.timeout, Some(Duration::from_secs(3)));
        assert!(!config.is_idempotent("Any"));
    }

    #[test]
    fn method_settings_override_the_reference() {
        let config: ReferenceConfig = serde_json::from_str(
            r#"{"loadbalance":"roundrobin","retries":1,"methods":{"Get":{"idempotent":true,"retries":4,"timeout":"100ms"}}}"#,
        )
        .unwrap();
        assert_eq!(config.loadbalance, LoadBalanceKind::RoundRobin);
        assert!(config.is_idempotent("Get"));
        assert!(!config.is_idempotent("Put"));
        assert_eq!(config.retries_for("Get"), 4);
        assert_eq!(config.retries_for("Put"), 1);
        assert_eq!(config.timeout_for("Get"), Some(Duration::from_millis(100)));
    }

    #[test]
    fn out_of_range_values_are_named() {
        let key = |config: ReferenceConfig| config.validate().unwrap_err().key;
        assert_eq!(
            key(ReferenceConfig {
                forks: 0,
                ..Default::default()
            }),
            "forks"
        );
        assert_eq!(
            key(ReferenceConfig {
                timeout: Some(Duration::ZERO),
                ..Default::default()
            }),
            "timeout"
        );
        assert_eq!(
            key(ReferenceConfig {
                hash_key: "a b".into(),
                ..Default::default()
            }),
            "hash_key"
        );
        let blacklist = BlacklistConfig {
            jitter: 7.5,
            ..Default::default()
        };
        assert_eq!(blacklist.validate().unwrap_err().key, "jitter");
        let blacklist = BlacklistConfig {
            max_ejection_percent: 500,
            ..Default::default()
        };
        assert_eq!(
            blacklist.validate().unwrap_err().key,
            "max_ejection_percent"
        );
        let directory = DirectoryConfig {
            ewma_decay: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(directory.validate().unwrap_err().key, "ewma_decay");
        assert!(ReferenceConfig::default().validate().is_ok());
        assert!(BlacklistConfig::default().validate().is_ok());
        assert!(DirectoryConfig::default().validate().is_ok());
    }

    #[test]
    fn unknown_keys_and_kinds_are_errors() {
        let error = serde_json::from_str::<ReferenceConfig>(r#"{"retry":1}"#).unwrap_err();
        assert!(error.to_string().contains("retry"), "{error}");
        let error =
            serde_json::from_str::<ReferenceConfig>(r#"{"cluster":"failsoft"}"#).unwrap_err();
        assert!(error.to_string().contains("failsoft"), "{error}");
    }
}
