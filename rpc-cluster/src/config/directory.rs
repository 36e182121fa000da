//! How the directory treats registry notifications, under `consumer.directory`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::invalid::{InvalidSetting, invalid, positive};

/// How the directory treats registry notifications, under `consumer.directory`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
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
    /// Stall detection: a call whose answer (its response head) is overdue takes its
    /// instance out of the picks while a PING checks the connection; an unanswered PING
    /// closes the connection and ejects the instance. Default true.
    #[serde(alias = "stall-detection")]
    pub stall_detection: bool,
    /// A call is overdue after this many times its instance's latency estimate (the
    /// peak-EWMA, which jumps to any slower answer)... Default 4.
    #[serde(alias = "stall-factor")]
    pub stall_factor: u32,
    /// ... and never before this. Default 50 ms: well above a loopback or data-centre
    /// round trip and the usual scheduling delays of a loaded host, and well below any
    /// attempt timeout, so a host that vanished or a paused process stops getting new
    /// calls within about a tenth of a second. A call slower than that on a live
    /// instance costs one PING (answered in well under a millisecond), no failure.
    #[serde(with = "humantime_serde", alias = "stall-floor")]
    pub stall_floor: Duration,
}

impl DirectoryConfig {
    /// Checks ranges serde cannot.
    ///
    /// # Errors
    /// The first [`InvalidSetting`] found.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        positive("ewma_decay", Some(self.ewma_decay))?;
        positive("stall_floor", Some(self.stall_floor))?;
        if self.stall_factor == 0 {
            invalid(
                "stall_factor",
                "must be at least 1 (stall_detection: false turns the detection off)",
            )?;
        }
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
            stall_detection: true,
            stall_factor: 4,
            stall_floor: Duration::from_millis(50),
        }
    }
}
