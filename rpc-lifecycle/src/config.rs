//! The `graceful_shutdown` configuration section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Bounds and switches of graceful offline, as the `graceful_shutdown` section of the
/// configuration spells them. Dubbo-go's kebab-case spellings (`step-timeout`, ...) are
/// accepted too. Durations are human-readable (`3s`, `500ms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Bound on the whole shutdown sequence. Default 60 s; any value is allowed
    /// (e.g. 25 s to fit Kubernetes' default 30 s grace period).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Time kept out of `timeout` for the application's shutdown callbacks (step 7):
    /// steps 1 to 6 end by `timeout - callback_timeout`, so the callbacks run even when
    /// the drains used every bound. The callbacks run one after another within it, each
    /// allowed an equal share of what is left when it starts. Kept only when a callback
    /// is registered; at most `timeout`. Default 5 s.
    #[serde(with = "humantime_serde", alias = "callback-timeout")]
    pub callback_timeout: Duration,
    /// Bound on each draining step (inbound, outbound) and on closing connections.
    /// Default 3 s.
    #[serde(with = "humantime_serde", alias = "step-timeout")]
    pub step_timeout: Duration,
    /// Longest wait for consumers to stop sending after unregistering. Default 3 s.
    #[serde(with = "humantime_serde", alias = "consumer-update-wait-time")]
    pub consumer_update_wait_time: Duration,
    /// The wait for consumers ends early once no request arrived for this long,
    /// counted from the start of the wait. Default 500 ms.
    #[serde(with = "humantime_serde", alias = "offline-request-window-timeout")]
    pub offline_request_window_timeout: Duration,
    /// Whether SIGTERM and SIGINT start the sequence (and a second one forces it).
    /// With `false` no handler of those is installed and the application calls
    /// `before_shutdown()` itself. Default `true`. SIGUSR2 (the hot upgrade) is handled
    /// either way while `upgrade.enabled` is true; with both false, no signal handler
    /// is installed at all.
    #[serde(alias = "internal-signal")]
    pub internal_signal: bool,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            callback_timeout: Duration::from_secs(5),
            step_timeout: Duration::from_secs(3),
            consumer_update_wait_time: Duration::from_secs(3),
            offline_request_window_timeout: Duration::from_millis(500),
            internal_signal: true,
        }
    }
}

impl ShutdownConfig {
    /// Checks the bounds that make no sense at zero: `timeout` (the whole sequence would
    /// be cut before step 1 ends, forcing every request in flight) and `step_timeout`
    /// (every drain and every GOAWAY exchange would be forced) — and that
    /// `callback_timeout` leaves the steps some of `timeout`. The two waits for
    /// consumers may be zero: that is a deliberate "do not wait".
    ///
    /// # Errors
    /// The key (as the configuration file spells it, e.g. `timeout`) and what is wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (key, value) in [
            ("timeout", self.timeout),
            ("step_timeout", self.step_timeout),
        ] {
            if value.is_zero() {
                return Err((
                    key,
                    "must be more than 0: a zero bound forces every request in flight".into(),
                ));
            }
        }
        if self.callback_timeout >= self.timeout {
            return Err((
                "callback_timeout",
                format!(
                    "must be less than timeout ({:?}): it is kept out of timeout for the \
                     callbacks, and would leave the shutdown steps no time",
                    self.timeout
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_bounds_are_refused_naming_the_key_and_zero_waits_allowed() {
        let zero_total = ShutdownConfig {
            timeout: Duration::ZERO,
            ..ShutdownConfig::default()
        };
        assert_eq!(zero_total.validate().unwrap_err().0, "timeout");
        let zero_step = ShutdownConfig {
            step_timeout: Duration::ZERO,
            ..ShutdownConfig::default()
        };
        assert_eq!(zero_step.validate().unwrap_err().0, "step_timeout");
        let all_for_callbacks = ShutdownConfig {
            timeout: Duration::from_secs(5),
            ..ShutdownConfig::default()
        };
        assert_eq!(
            all_for_callbacks.validate().unwrap_err().0,
            "callback_timeout"
        );
        let no_waits = ShutdownConfig {
            consumer_update_wait_time: Duration::ZERO,
            offline_request_window_timeout: Duration::ZERO,
            ..ShutdownConfig::default()
        };
        assert_eq!(no_waits.validate(), Ok(()));
    }

    #[test]
    fn reads_both_spellings_and_human_durations() {
        let snake: ShutdownConfig =
            serde_json::from_str(r#"{"step_timeout":"250ms","timeout":"25s"}"#).unwrap();
        assert_eq!(snake.step_timeout, Duration::from_millis(250));
        assert_eq!(snake.timeout, Duration::from_secs(25));
        let kebab: ShutdownConfig =
            serde_json::from_str(r#"{"consumer-update-wait-time":"1s","internal-signal":false}"#)
                .unwrap();
        assert_eq!(kebab.consumer_update_wait_time, Duration::from_secs(1));
        let callbacks: ShutdownConfig =
            serde_json::from_str(r#"{"callback-timeout":"2s"}"#).unwrap();
        assert_eq!(callbacks.callback_timeout, Duration::from_secs(2));
        assert!(!kebab.internal_signal);
        assert_eq!(
            kebab.offline_request_window_timeout,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn rejects_unknown_keys_and_negative_durations() {
        let unknown = serde_json::from_str::<ShutdownConfig>(r#"{"timout":"1s"}"#).unwrap_err();
        assert!(unknown.to_string().contains("timout"), "{unknown}");
        let negative = serde_json::from_str::<ShutdownConfig>(r#"{"timeout":"-1s"}"#);
        assert!(negative.is_err());
    }
}
