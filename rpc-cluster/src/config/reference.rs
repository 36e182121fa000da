//! Settings of one reference, under `consumer.references.<service>`, and of its
//! methods.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_core::Compression;
use serde::{Deserialize, Serialize};

use super::failback::FailbackConfig;
use super::invalid::{InvalidSetting, invalid, positive};
use super::kinds::{ClusterKind, LoadBalanceKind};
use super::retry_budget::RetryBudgetConfig;

/// Per-method settings, under `references.<service>.methods.<Method>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct MethodConfig {
    /// Whether the method may run twice safely; only then are timeouts and UNAVAILABLE
    /// retried. Default: the reference's `idempotent`.
    pub idempotent: Option<bool>,
    /// Overrides the reference's `retries` for this method.
    pub retries: Option<u32>,
    /// Overrides the reference's `timeout` for this method.
    #[serde(with = "humantime_serde::option")]
    pub timeout: Option<Duration>,
    /// Whether this server-streaming method's stream is re-opened on another instance
    /// when its provider moves it (ends it with `lossless_rpc::stream::moved` as it goes
    /// offline), with the original request and the moved stream's trailers as metadata.
    /// A rule given in code (`ApplicationBuilder::resume_rule`) replaces that request.
    /// Default false.
    pub resumable: bool,
}

/// Settings of one reference, under `consumer.references.<service>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
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
    /// caller lowers it, as does the deadline a provider's handler inherits
    /// (`inherit_deadline`). For a request still being written when its attempt starts
    /// (a client or bidirectional stream not complete at once) it counts from the end of
    /// the request: its headers come only once the caller has finished, so counted from
    /// the start it would cut every longer upload.
    #[serde(with = "humantime_serde::option")]
    pub timeout: Option<Duration>,
    /// Whether a call made while serving a call (inside a provider's handler) inherits
    /// what remains of the served call's deadline ([`CallContext`](rpc_core::CallContext)):
    /// it sends only that as `grpc-timeout`, its attempts end by it, and with no time
    /// left it fails `DEADLINE_EXCEEDED` without being sent. A `grpc-timeout` the
    /// handler sets itself is kept when shorter. `false` for a call that must outlive
    /// its caller (an audit write, say). Default true.
    #[serde(alias = "inherit-deadline")]
    pub inherit_deadline: bool,
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
    /// How long a call that finds no instance to send to waits for one to be listed
    /// (gRPC's wait-for-ready): the service's only instance between its stop and its
    /// start, a service scaled up from zero, or the only instance refusing as it closes.
    /// Never past the attempt's `timeout` or the caller's deadline; `0s` fails such a
    /// call at once with "no provider". Default 3 s.
    #[serde(with = "humantime_serde", alias = "wait-for-provider")]
    pub wait_for_provider: Duration,
    /// Smallest backoff before a retry (full jitter, doubling per attempt). Default 2 ms.
    #[serde(with = "humantime_serde", alias = "backoff-base")]
    pub backoff_base: Duration,
    /// Largest backoff before a retry. Default 50 ms.
    #[serde(with = "humantime_serde", alias = "backoff-max")]
    pub backoff_max: Duration,
    /// Largest request body buffered for replay on retry, in bytes (a number, or a
    /// size with a unit: `4 MiB`). Default 4 MiB
    /// (gRPC's default message limit), counted as sent (gRPC framing and compression
    /// included). Larger requests are sent once; under `forking` to one instance, and
    /// under `broadcast` refused (`FAILED_PRECONDITION`).
    #[serde(with = "rpc_core::byte_size", alias = "max-replay-bytes")]
    pub max_replay_bytes: usize,
    /// Largest client or bidirectional stream (a request body still being written when
    /// its call begins) kept as it is sent, in bytes, so that a refusal can send it
    /// whole to another instance: the smaller of this and `max_replay_bytes`. Default
    /// 256 KiB (gRPC core's per-call retry buffer): a stream that refusal finds longer,
    /// or not yet finished by its caller, is sent again only if nothing of it was sent.
    /// Keeping 4 MiB of each 6.4 MB stream of 64 KiB messages cost 10 % of their rate
    /// (`docs/benchmarks.md`, "Streams").
    #[serde(with = "rpc_core::byte_size", alias = "max-replay-stream-bytes")]
    pub max_replay_stream_bytes: usize,
    /// How many retries failover may add to the calls (20 % plus 10/s over 10 s by
    /// default); see [`RetryBudgetConfig`].
    #[serde(alias = "retry-budget")]
    pub retry_budget: RetryBudgetConfig,
    /// How failback retries in the background (every 5 s, 3 times, 1024 calls at most
    /// by default); see [`FailbackConfig`].
    pub failback: FailbackConfig,
    /// How request messages are compressed: `none`, `gzip` or `zstd` (the provider must
    /// read it: every gRPC implementation reads gzip, zstd needs one that speaks it).
    /// Compressed responses are read whatever this says. Default none.
    pub compression: Compression,
}

impl Default for ReferenceConfig {
    fn default() -> Self {
        Self {
            cluster: ClusterKind::default(),
            loadbalance: LoadBalanceKind::default(),
            retries: 2,
            timeout: Some(Duration::from_secs(3)),
            inherit_deadline: true,
            idempotent: false,
            methods: BTreeMap::new(),
            warmup: None,
            forks: 2,
            hash_key: rpc_core::metadata::HASH_KEY.as_str().to_owned(),
            group: String::new(),
            version: String::new(),
            check: None,
            wait_for_provider: Duration::from_secs(3),
            backoff_base: Duration::from_millis(2),
            backoff_max: Duration::from_millis(50),
            max_replay_bytes: 4 * 1024 * 1024,
            max_replay_stream_bytes: 256 * 1024,
            retry_budget: RetryBudgetConfig::default(),
            failback: FailbackConfig::default(),
            compression: Compression::None,
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
        self.retry_budget
            .validate()
            .map_err(|e| e.within("retry_budget"))?;
        self.failback.validate().map_err(|e| e.within("failback"))
    }

    fn method(&self, method: &str) -> Option<&MethodConfig> {
        if self.methods.is_empty() {
            return None;
        }
        self.methods.get(method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BlacklistConfig, DirectoryConfig};

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
    fn compression_is_none_gzip_or_zstd() {
        assert_eq!(ReferenceConfig::default().compression, Compression::None);
        let config: ReferenceConfig = serde_json::from_str(r#"{"compression":"zstd"}"#).unwrap();
        assert_eq!(config.compression, Compression::Zstd);
        let error =
            serde_json::from_str::<ReferenceConfig>(r#"{"compression":"lz4"}"#).unwrap_err();
        assert!(error.to_string().contains("lz4"), "{error}");
    }

    #[test]
    fn unknown_keys_and_kinds_are_errors() {
        let error = serde_json::from_str::<ReferenceConfig>(r#"{"retry":1}"#).unwrap_err();
        assert!(error.to_string().contains("retry"), "{error}");
        let error =
            serde_json::from_str::<ReferenceConfig>(r#"{"cluster":"failsoft"}"#).unwrap_err();
        assert!(error.to_string().contains("failsoft"), "{error}");
    }

    #[test]
    fn retry_budget_and_failback_have_todays_defaults_and_kebab_aliases() {
        let config = ReferenceConfig::default();
        let budget = |ratio, min_per_second, ttl| RetryBudgetConfig {
            ratio,
            min_per_second,
            ttl: Duration::from_secs(ttl),
        };
        let failback = |retry_period, retries, queue_capacity| FailbackConfig {
            retry_period,
            retries,
            queue_capacity,
        };
        assert_eq!(config.retry_budget, budget(0.2, 10, 10));
        assert_eq!(config.failback, failback(Duration::from_secs(5), 3, 1024));
        let config: ReferenceConfig = serde_json::from_str(
            r#"{"retry-budget":{"ratio":0.5,"min-per-second":1,"ttl":"3s"},
                "failback":{"retry-period":"50ms","retries":2,"queue-capacity":8}}"#,
        )
        .unwrap();
        assert_eq!(config.retry_budget, budget(0.5, 1, 3));
        assert_eq!(config.failback, failback(Duration::from_millis(50), 2, 8));
    }

    #[test]
    fn out_of_range_budget_and_failback_values_are_named() {
        let key = |text: &str| {
            serde_json::from_str::<ReferenceConfig>(text)
                .unwrap()
                .validate()
                .unwrap_err()
                .key
        };
        assert_eq!(
            key(r#"{"retry_budget":{"ratio":10.5}}"#),
            "retry_budget.ratio"
        );
        assert_eq!(
            key(r#"{"retry_budget":{"ratio":-0.1}}"#),
            "retry_budget.ratio"
        );
        assert_eq!(
            key(r#"{"retry_budget":{"ttl":"500ms"}}"#),
            "retry_budget.ttl"
        );
        assert_eq!(
            key(r#"{"retry_budget":{"ttl":"1500ms"}}"#),
            "retry_budget.ttl"
        );
        assert_eq!(key(r#"{"retry_budget":{"ttl":"61s"}}"#), "retry_budget.ttl");
        assert_eq!(
            key(r#"{"failback":{"retry_period":"0s"}}"#),
            "failback.retry_period"
        );
        assert_eq!(key(r#"{"failback":{"retries":0}}"#), "failback.retries");
        assert_eq!(
            key(r#"{"failback":{"queue_capacity":0}}"#),
            "failback.queue_capacity"
        );
        let error =
            serde_json::from_str::<ReferenceConfig>(r#"{"failback":{"period":"1s"}}"#).unwrap_err();
        assert!(error.to_string().contains("period"), "{error}");
    }
}
