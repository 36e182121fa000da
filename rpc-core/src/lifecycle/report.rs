//! What a shutdown did: each step's duration and outcome, and the exit code it implies.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The seven steps of graceful offline, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// 1. Withdraw every registration (subscriptions stay).
    Unregister,
    /// 2. Wait until consumers stop sending (or the bound).
    WaitForConsumers,
    /// 3. Refuse new requests as "closing, not executed".
    RejectNew,
    /// 4. Wait for inbound requests in flight.
    DrainInbound,
    /// 5. Wait for outbound requests in flight.
    DrainOutbound,
    /// 6. Close listeners, connections (GOAWAY), channels, subscriptions, registries.
    DestroyProtocols,
    /// 7. Run the application's shutdown callbacks.
    Callbacks,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Unregister => "unregister",
            Step::WaitForConsumers => "wait-for-consumers",
            Step::RejectNew => "reject-new",
            Step::DrainInbound => "drain-inbound",
            Step::DrainOutbound => "drain-outbound",
            Step::DestroyProtocols => "destroy-protocols",
            Step::Callbacks => "callbacks",
        })
    }
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepOutcome {
    /// Its condition held (or it had nothing to wait for).
    Completed,
    /// Its bound (`step_timeout`, `consumer_update_wait_time` or what was left of
    /// `timeout`) passed first.
    TimedOut,
    /// It did not run: a second signal skipped it, or it had no object (step 2 of an
    /// application that exports no service).
    Skipped,
}

impl StepOutcome {
    /// Every outcome.
    pub const ALL: [StepOutcome; 3] = [Self::Completed, Self::TimedOut, Self::Skipped];
}

impl fmt::Display for StepOutcome {
    /// As serialized: `completed`, `timed-out`, `skipped`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Completed => "completed",
            Self::TimedOut => "timed-out",
            Self::Skipped => "skipped",
        })
    }
}

/// One step's line in the report. `S` is the kind of step: the shutdown's [`Step`]
/// unless said otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepReport<S = Step> {
    /// Which step.
    pub step: S,
    /// How long it took.
    pub duration: Duration,
    /// How it ended.
    pub outcome: StepOutcome,
}

/// The signal that interrupted a shutdown already under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interrupt {
    /// A second SIGINT: exit code 130.
    Sigint,
    /// A second SIGTERM: exit code 143.
    Sigterm,
}

/// The result of one run of the shutdown sequence.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShutdownReport {
    /// Steps in the order they ran.
    pub steps: Vec<StepReport>,
    /// From the start of step 1 to the end of step 7.
    pub total: Duration,
    /// Inbound requests refused as "closing, not executed" (consumers re-route them).
    pub rejected: u64,
    /// Inbound requests still in flight when the drain-inbound bound passed.
    pub inbound_left: usize,
    /// Outbound requests still in flight when the drain-outbound bound passed.
    pub outbound_left: usize,
    /// Registrations that could not be withdrawn, by error or because the step's bound
    /// passed first (they expire with the registry session or lease).
    pub unregister_failures: usize,
    /// Connections closed after the GOAWAY exchange.
    pub connections_closed: usize,
    /// Connections closed by force when the bound passed.
    pub connections_forced: usize,
    /// Calls (typically streams) still open at the bound of step 6, ended with
    /// `UNAVAILABLE`, "provider shut down before the stream ended".
    #[serde(default)]
    pub streams_cut: usize,
    /// Callbacks that panicked or did not finish in time.
    pub callbacks_failed: usize,
    /// Set when a second signal skipped the rest of the sequence.
    pub interrupted_by: Option<Interrupt>,
}

impl ShutdownReport {
    /// Whether anything had to be cut short: requests left in flight, streams ended at
    /// the bound, connections closed by force, a callback that failed, or a second
    /// signal. A step that merely used its
    /// full wait (e.g. consumers kept sending until `consumer_update_wait_time`) loses
    /// nothing and does not count.
    pub fn forced(&self) -> bool {
        self.inbound_left > 0
            || self.outbound_left > 0
            || self.connections_forced > 0
            || self.streams_cut > 0
            || self.callbacks_failed > 0
            || self.interrupted_by.is_some()
    }

    /// The process exit code this shutdown implies: 130 / 143 after a second SIGINT /
    /// SIGTERM, 1 when something was forced, 0 when clean. Meant for the binary's `main`,
    /// which exits with it (library code never ends the process).
    pub fn exit_code(&self) -> i32 {
        match self.interrupted_by {
            Some(Interrupt::Sigint) => 130,
            Some(Interrupt::Sigterm) => 143,
            None if self.forced() => 1,
            None => 0,
        }
    }

    /// The duration of `step`, if it ran.
    pub fn step(&self, step: Step) -> Option<&StepReport> {
        self.steps.iter().find(|s| s.step == step)
    }
}

impl fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.forced() { "forced" } else { "clean" };
        write!(f, "{state} in {} ms:", self.total.as_millis())?;
        for step in &self.steps {
            let mark = match step.outcome {
                StepOutcome::Completed => "",
                StepOutcome::TimedOut => " (bound)",
                StepOutcome::Skipped => " (skipped)",
            };
            write!(f, " {}={}ms{mark}", step.step, step.duration.as_millis())?;
        }
        write!(
            f,
            "; rejected={} inbound_left={} outbound_left={} connections closed={} forced={}",
            self.rejected,
            self.inbound_left,
            self.outbound_left,
            self.connections_closed,
            self.connections_forced
        )?;
        if self.streams_cut > 0 {
            write!(f, " streams_cut={}", self.streams_cut)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_follows_interrupt_then_force() {
        let clean = ShutdownReport::default();
        assert_eq!(clean.exit_code(), 0);
        let forced = ShutdownReport {
            inbound_left: 2,
            ..Default::default()
        };
        assert_eq!(forced.exit_code(), 1);
        let sigint = ShutdownReport {
            interrupted_by: Some(Interrupt::Sigint),
            ..Default::default()
        };
        assert_eq!(sigint.exit_code(), 130);
        let sigterm = ShutdownReport {
            interrupted_by: Some(Interrupt::Sigterm),
            ..forced
        };
        assert_eq!(sigterm.exit_code(), 143);
    }
}
