//! `provider.limit`: the provider's adaptive concurrency limit
//! (`lossless_rpc::filter::limit`).

use std::time::Duration;

use rpc_filter::limit::GradientConfig;
use serde::{Deserialize, Serialize};

/// `provider.limit`: refuse the excess of an overload at once (`RESOURCE_EXHAUSTED`,
/// `rpc-not-executed: overloaded`) instead of queueing it, under a limit on requests in
/// flight learnt from their round-trip time (Netflix concurrency-limits' Gradient2; see
/// `lossless_rpc::filter::limit`). Off by default.
///
/// ```yaml
/// provider:
///   limit:
///     enabled: true
///     initial_limit: 100
///     min_limit: 50
///     max_limit: 1000
///     window: 100ms          # the limit moves at most once a window
///     min_window_samples: 10
///     tolerance: 1.5         # current RTT / long-term RTT tolerated before shrinking
///     smoothing: 0.2
///     queue_size: 4
///     long_window: 600       # windows in the long-term RTT average
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LimitConfig {
    /// Limit inbound requests. Default false.
    pub enabled: bool,
    /// The limit before the first window is measured. Default 100.
    #[serde(alias = "initial-limit")]
    pub initial_limit: u32,
    /// The limit never goes below this (at least 1). Default 50.
    #[serde(alias = "min-limit")]
    pub min_limit: u32,
    /// The limit never goes above this. Default 1 000.
    #[serde(alias = "max-limit")]
    pub max_limit: u32,
    /// Length of a sampling window. Default 100 ms.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Fewest samples that close a window (at least 1). Default 10.
    #[serde(alias = "min-window-samples")]
    pub min_window_samples: u32,
    /// Current RTT over long-term RTT tolerated before the limit shrinks (≥ 1). Default
    /// 1.5.
    pub tolerance: f64,
    /// Share of a new estimate taken per window, in (0, 1]. Default 0.2.
    pub smoothing: f64,
    /// Requests allowed to queue on top of the estimate. Default 4.
    #[serde(alias = "queue-size")]
    pub queue_size: u32,
    /// Windows the long-term RTT averages over (at least 1). Default 600.
    #[serde(alias = "long-window")]
    pub long_window: u32,
}

impl Default for LimitConfig {
    fn default() -> Self {
        let gradient = GradientConfig::default();
        Self {
            enabled: false,
            initial_limit: gradient.initial_limit,
            min_limit: gradient.min_limit,
            max_limit: gradient.max_limit,
            window: gradient.window,
            min_window_samples: gradient.min_window_samples,
            tolerance: gradient.tolerance,
            smoothing: gradient.smoothing,
            queue_size: gradient.queue_size,
            long_window: gradient.long_window,
        }
    }
}

impl LimitConfig {
    /// The algorithm's parameters.
    pub fn gradient(&self) -> GradientConfig {
        let mut gradient = GradientConfig::default();
        gradient.initial_limit = self.initial_limit;
        gradient.min_limit = self.min_limit;
        gradient.max_limit = self.max_limit;
        gradient.window = self.window;
        gradient.min_window_samples = self.min_window_samples;
        gradient.tolerance = self.tolerance;
        gradient.smoothing = self.smoothing;
        gradient.queue_size = self.queue_size;
        gradient.long_window = self.long_window;
        gradient
    }

    /// Checks what serde cannot; returns the key (under `provider.limit`) and what is
    /// wrong. Checked when disabled too: a bad value is a mistake whether or not it is
    /// in use yet.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        let at_least_one = |key, value: u32| {
            if value == 0 {
                Err((key, "must be at least 1".to_owned()))
            } else {
                Ok(())
            }
        };
        at_least_one("min_limit", self.min_limit)?;
        at_least_one("min_window_samples", self.min_window_samples)?;
        at_least_one("long_window", self.long_window)?;
        if self.max_limit < self.min_limit {
            return Err((
                "max_limit",
                format!("must be at least min_limit ({})", self.min_limit),
            ));
        }
        if !(self.min_limit..=self.max_limit).contains(&self.initial_limit) {
            return Err((
                "initial_limit",
                format!(
                    "must be within min_limit..=max_limit ({}..={})",
                    self.min_limit, self.max_limit
                ),
            ));
        }
        if self.window.is_zero() {
            return Err(("window", "must be more than 0".to_owned()));
        }
        if !(self.tolerance >= 1.0 && self.tolerance.is_finite()) {
            return Err(("tolerance", "must be a number ≥ 1.0".to_owned()));
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(("smoothing", "must be within (0.0, 1.0]".to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, ConfigError, ConfigFormat};

    fn yaml(text: &str) -> Result<Config, ConfigError> {
        Config::from_str(text, ConfigFormat::Yaml, "app.yaml")
    }

    #[test]
    fn the_limit_is_off_by_default_and_loads_in_either_spelling() {
        let config = yaml("").unwrap();
        assert!(!config.provider.limit.enabled);
        let config = yaml(
            "provider:\n  limit:\n    enabled: true\n    max-limit: 50\n    min_limit: 2\n    \
             initial-limit: 10\n    window: 250ms\n    tolerance: 2\n",
        )
        .unwrap();
        let gradient = config.provider.limit.gradient();
        assert_eq!(gradient.max_limit, 50);
        assert_eq!(gradient.min_limit, 2);
        assert_eq!(gradient.initial_limit, 10);
        assert_eq!(gradient.window, std::time::Duration::from_millis(250));
        assert_eq!(gradient.tolerance, 2.0);
    }

    #[test]
    fn bad_values_name_the_key_and_the_file() {
        for (text, key) in [
            (
                "{ enabled: true, min_limit: 0 }",
                "provider.limit.min_limit",
            ),
            (
                "{ enabled: true, min_limit: 10, max_limit: 5 }",
                "provider.limit.max_limit",
            ),
            (
                "{ enabled: true, initial_limit: 5000 }",
                "provider.limit.initial_limit",
            ),
            ("{ enabled: true, window: 0s }", "provider.limit.window"),
            (
                "{ enabled: true, tolerance: 0.5 }",
                "provider.limit.tolerance",
            ),
            (
                "{ enabled: true, smoothing: 0 }",
                "provider.limit.smoothing",
            ),
            ("{ enabled: true, colour: blue }", "provider.limit.colour"),
            ("{ enabled: true, window: soon }", "provider.limit.window"),
        ] {
            match yaml(&format!("provider:\n  limit: {text}\n")).unwrap_err() {
                ConfigError::Invalid {
                    origin, key: got, ..
                } => {
                    assert_eq!(origin, "app.yaml");
                    assert_eq!(got, key, "{text}");
                }
                other => panic!("{text}: expected Invalid, got {other}"),
            }
        }
    }
}
