//! Outlier ejection (the blacklist), under `consumer.blacklist`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::invalid::{InvalidSetting, invalid};

/// Outlier ejection (the blacklist), under `consumer.blacklist`. Defaults follow gRPC's
/// outlier detection (A50) and Envoy: 5 consecutive failures, 30 s × times ejected,
/// capped at 300 s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
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
