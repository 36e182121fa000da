//! The `graceful_shutdown` configuration section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Bounds and switches of graceful offline, as the `graceful_shutdown` section of the
/// configuration spells them. Dubbo-go's kebab-case spellings (`step-timeout`, ...) are
/// accepted too. Durations are human-readable (`3s`, `500ms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ShutdownConfig {
    /// Bound on the whole shutdown sequence. Default 60 s; any value is allowed
    /// (e.g. 25 s to fit Kubernetes' default 30 s grace period).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Time kept out of `timeout` for the application's shutdown callbacks (step 7):
    /// steps 1 to 6 end by `timeout - callback_timeout`, so the callbacks run even when
    /// the drains used every bound. The callbacks run one after another within it, each
    /// allowed an equal share of what is left when it starts. Kept only when a callback
    /// is registered.
    ///
    /// Unset (the default), the time kept is 5 s or half of `timeout`, whichever is
    /// less ([`ShutdownConfig::callback_time`]), so any valid `timeout` is accepted:
    /// `timeout: 5s` keeps 2.5 s for the callbacks. Set, it is kept as given and must be
    /// less than `timeout`, or the configuration is refused naming this key.
    #[serde(with = "humantime_serde::option", alias = "callback-timeout")]
    pub callback_timeout: Option<Duration>,
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
            callback_timeout: None,
            step_timeout: Duration::from_secs(3),
            consumer_update_wait_time: Duration::from_secs(3),
            offline_request_window_timeout: Duration::from_millis(500),
            internal_signal: true,
        }
    }
}

/// What an unset `callback_timeout` keeps for the callbacks, at most (and never more
/// than half of `timeout`).
pub const DEFAULT_CALLBACK_TIMEOUT: Duration = Duration::from_secs(5);

impl ShutdownConfig {
    /// The time kept out of `timeout` for the shutdown callbacks (when one is
    /// registered): `callback_timeout` when set, else [`DEFAULT_CALLBACK_TIMEOUT`] or half
    /// of `timeout`, whichever is less.
    pub fn callback_time(&self) -> Duration {
        self.callback_timeout
            .unwrap_or_else(|| DEFAULT_CALLBACK_TIMEOUT.min(self.timeout / 2))
    }

    /// Checks the bounds that make no sense at zero: `timeout` (the whole sequence would
    /// be cut before step 1 ends, forcing every request in flight) and `step_timeout`
    /// (every drain and every GOAWAY exchange would be forced) — and that a
    /// `callback_timeout` that is set leaves the steps some of `timeout` (an unset one
    /// always does: see [`ShutdownConfig::callback_time`]). The two waits for
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
        if let Some(callbacks) = self.callback_timeout
            && callbacks >= self.timeout
        {
            return Err((
                "callback_timeout",
                format!(
                    "{callbacks:?} must be less than timeout ({:?}): it is kept out of timeout for the \
                     callbacks, and would leave the shutdown steps no time; lower it, or \
                     leave it unset to keep 5 s or half of timeout, whichever is less",
                    self.timeout,
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
        let no_waits = ShutdownConfig {
            consumer_update_wait_time: Duration::ZERO,
            offline_request_window_timeout: Duration::ZERO,
            ..ShutdownConfig::default()
        };
        assert_eq!(no_waits.validate(), Ok(()));
    }

    /// Issue 25, point 6: kitex's and pingora's 5 s shutdown is a valid `timeout`; an
    /// unset `callback_timeout` adapts to it (half of it), while one set too large is
    /// refused naming the key.
    #[test]
    fn an_unset_callback_timeout_never_refuses_a_valid_timeout() {
        let five: ShutdownConfig = serde_json::from_str(r#"{"timeout":"5s"}"#).unwrap();
        assert_eq!(five.validate(), Ok(()));
        assert_eq!(five.callback_time(), Duration::from_millis(2_500));
        let tiny: ShutdownConfig = serde_json::from_str(r#"{"timeout":"1ms"}"#).unwrap();
        assert_eq!(tiny.validate(), Ok(()));
        assert_eq!(tiny.callback_time(), Duration::from_micros(500));
        assert_eq!(
            ShutdownConfig::default().callback_time(),
            DEFAULT_CALLBACK_TIMEOUT,
            "60 s: 5 s kept"
        );

        let explicit: ShutdownConfig =
            serde_json::from_str(r#"{"timeout":"5s","callback_timeout":"5s"}"#).unwrap();
        let (key, message) = explicit.validate().unwrap_err();
        assert_eq!(key, "callback_timeout");
        assert!(message.contains("less than timeout (5s)"), "{message}");
        let kept: ShutdownConfig =
            serde_json::from_str(r#"{"timeout":"5s","callback-timeout":"4s"}"#).unwrap();
        assert_eq!(kept.validate(), Ok(()));
        assert_eq!(kept.callback_time(), Duration::from_secs(4), "kept as set");
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
        assert_eq!(callbacks.callback_timeout, Some(Duration::from_secs(2)));
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
