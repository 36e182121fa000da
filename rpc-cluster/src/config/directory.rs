//! How the directory treats registry notifications, under `consumer.directory`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::invalid::{InvalidSetting, positive};

/// How the directory treats registry notifications, under `consumer.directory`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectoryConfig {
    /// Keep the last known instances when the registry delivers an empty set because
    /// of a fault (an authoritative empty set — the last instance left — is applied).
    /// Default true.
    #[serde(alias = "empty-protection")]
    pub empty_protection: bool,
    /// How long a removed or closing instance may keep its connection for calls in
    /// flight; calls still running after that are cancelled. Default 30 s. Dubbo-go
    /// keeps this setting in its shutdown section (`shutdown.closing-invoker-expire-time`),
    /// and `rpc`'s configuration reads it from there too.
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
