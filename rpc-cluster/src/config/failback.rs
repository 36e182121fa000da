//! Background retries of the failback strategy, under
//! `consumer.references.<service>.failback`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::invalid::{InvalidSetting, invalid};

/// How `failback` retries failed calls in the background. The defaults are Dubbo's:
/// every 5 s, 3 times, at most 1024 calls waiting.
///
/// ```yaml
/// failback: { retry_period: 5s, retries: 3, queue_capacity: 1024 }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct FailbackConfig {
    /// Pause before each background retry. Default 5 s.
    #[serde(with = "humantime_serde", alias = "retry-period")]
    pub retry_period: Duration,
    /// Background retries of one call before it is dropped (and logged). Default 3.
    pub retries: u32,
    /// Calls waiting for a background retry, at most; a failed call beyond that is
    /// dropped at once (and logged). Default 1024.
    #[serde(alias = "queue-capacity")]
    pub queue_capacity: usize,
}

impl Default for FailbackConfig {
    fn default() -> Self {
        Self {
            retry_period: Duration::from_secs(5),
            retries: 3,
            queue_capacity: 1024,
        }
    }
}

impl FailbackConfig {
    /// Checks ranges serde cannot.
    ///
    /// # Errors
    /// The first [`InvalidSetting`] found.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.retry_period.is_zero() {
            invalid("retry_period", "must be more than 0")?;
        }
        if self.retries == 0 {
            invalid("retries", "must be at least 1")?;
        }
        if self.queue_capacity == 0 {
            invalid("queue_capacity", "must be at least 1")?;
        }
        Ok(())
    }
}
