//! The retry budget of one reference, under `consumer.references.<service>.retry_budget`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::invalid::{InvalidSetting, invalid};

/// Longest window of a retry budget: one counter pair per second is kept for it
/// (tower's `TpsBudget` has the same bound).
pub(crate) const MAX_RETRY_BUDGET_TTL: Duration = Duration::from_secs(60);

/// How many retries the strategies that retry (failover) may add to a reference's
/// traffic: `ratio` of the calls plus `min_per_second`, counted over the last `ttl`.
/// The names and the defaults are Finagle's and tower's (`TpsBudget`): 20 % of the
/// calls plus 10 retries per second, over 10 s.
///
/// ```yaml
/// retry_budget: { ratio: 0.2, min_per_second: 10, ttl: 10s }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetryBudgetConfig {
    /// Retries allowed per call made, as a fraction: 0.2 lets retries add 20 % to the
    /// calls. 0.0..=10.0 (0 to 1000 %). Default 0.2.
    pub ratio: f64,
    /// Retries allowed each second whatever the traffic, so a reference with few calls
    /// can still retry. Default 10.
    #[serde(alias = "min-per-second")]
    pub min_per_second: u32,
    /// How long a call counts toward the budget (and a retry against it): whole
    /// seconds, 1 s to 60 s. Default 10 s.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
}

impl Default for RetryBudgetConfig {
    fn default() -> Self {
        Self {
            ratio: 0.2,
            min_per_second: 10,
            ttl: Duration::from_secs(10),
        }
    }
}

impl RetryBudgetConfig {
    /// Checks ranges serde cannot.
    ///
    /// # Errors
    /// The first [`InvalidSetting`] found.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if !(0.0..=10.0).contains(&self.ratio) {
            invalid("ratio", "must be 0.0..=10.0 (0 to 1000 % of the calls)")?;
        }
        if self.ttl < Duration::from_secs(1)
            || self.ttl > MAX_RETRY_BUDGET_TTL
            || self.ttl.subsec_nanos() != 0
        {
            invalid("ttl", "must be whole seconds, 1s to 60s")?;
        }
        Ok(())
    }
}
