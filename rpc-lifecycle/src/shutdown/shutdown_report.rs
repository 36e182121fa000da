//! What a shutdown did: each step's duration and outcome, what was left or cut, and the
//! exit code it implies.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::protocols::ConnectionTally;
use crate::step::{Step, StepReport, write_steps};

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
    /// Requests of rpc consumers refused as "closing, not executed" (step 3 on): the
    /// consumers re-send them to another instance.
    pub rejected: u64,
    /// Requests of other clients refused with `REFUSED_STREAM` (step 3 on). gRPC's own
    /// clients (C-core, Java, Go) retry such a stream by themselves; a client that does
    /// not (tonic's channel) reports it to its caller as `UNAVAILABLE`. The report
    /// cannot tell which, so each counts as a possible loss ([`ShutdownReport::forced`]).
    /// With the GOAWAY such clients get in step 2, none is expected.
    #[serde(default)]
    pub refused_streams: usize,
    /// Inbound requests still unfinished when step 6 had closed the connections: lost.
    /// A request still in flight at the drain's bound that then ends during step 6 is
    /// not counted (nor forced): it lost nothing.
    pub inbound_left: usize,
    /// Outbound calls still in flight when step 6 closed the references: cancelled.
    pub outbound_left: usize,
    /// Registrations that could not be withdrawn, by error or because the step's bound
    /// passed first (they expire with the registry session or lease).
    pub unregister_failures: usize,
    /// Connections that ended gracefully from the start of the shutdown on: closed by
    /// their consumer as it moved away (step 2), or after the GOAWAY exchange (step 6).
    pub connections_closed: usize,
    /// Connections closed by us with nothing in flight, without waiting for their peer
    /// to end the GOAWAY exchange (a peer that does not answer the PING, or ignores the
    /// GOAWAY and keeps the socket open): nothing is lost, so it is not forced.
    #[serde(default)]
    pub connections_idle: usize,
    /// Connections closed by force when the bound passed, with calls still on them.
    pub connections_forced: usize,
    /// Calls (typically streams) still open at the bound of step 6, ended with
    /// `UNAVAILABLE`, "provider shut down before the stream ended".
    #[serde(default)]
    pub streams_cut: usize,
    /// Streams whose handlers ended them as moved (`lossless_rpc::stream::moved`) once
    /// told that this instance goes offline: their consumers resume them elsewhere. Not
    /// forced.
    #[serde(default)]
    pub streams_moved: usize,
    /// Callbacks that panicked or did not finish in time.
    pub callbacks_failed: usize,
    /// Set when a second signal skipped the rest of the sequence.
    pub interrupted_by: Option<Interrupt>,
    /// Set when this process did not shut down but handed its instances over to a hot
    /// upgrade's new process (this pid): nothing was unregistered, and only the drain,
    /// the closing and the callbacks ran (the steps are the upgrade's, see
    /// `Lifecycle::last_upgrade`).
    #[serde(default)]
    pub handed_over_to: Option<u32>,
}

impl ShutdownReport {
    /// Adds what closing the connections came to.
    pub(crate) fn count_connections(&mut self, tally: ConnectionTally) {
        self.connections_closed += tally.closed;
        self.connections_idle += tally.idle;
        self.connections_forced += tally.forced;
        self.streams_cut += tally.streams_cut;
        self.refused_streams += tally.refused_streams;
    }

    /// Whether anything had to be cut short: requests left unfinished, streams ended at
    /// the bound, connections closed by force with calls on them, outbound calls
    /// cancelled, streams refused to a client that may not retry them, a callback that
    /// failed, or a second signal. A step that merely used its full wait (consumers kept
    /// sending until `consumer_update_wait_time`; a drain reached its bound but its
    /// request ended in step 6) and an idle connection closed without its peer's answer
    /// lose nothing and do not count.
    pub fn forced(&self) -> bool {
        self.inbound_left > 0
            || self.outbound_left > 0
            || self.connections_forced > 0
            || self.streams_cut > 0
            || self.refused_streams > 0
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
        if let Some(pid) = self.handed_over_to {
            write!(f, "handed over to pid {pid}, ")?;
        }
        write!(f, "{state} in {} ms", self.total.as_millis())?;
        if !self.steps.is_empty() {
            f.write_str(":")?;
        }
        write_steps(f, &self.steps)?;
        write!(
            f,
            "; rejected={} refused_streams={} inbound_left={} outbound_left={} connections closed={} idle={} forced={}",
            self.rejected,
            self.refused_streams,
            self.inbound_left,
            self.outbound_left,
            self.connections_closed,
            self.connections_idle,
            self.connections_forced
        )?;
        if self.streams_cut > 0 {
            write!(f, " streams_cut={}", self.streams_cut)?;
        }
        if self.streams_moved > 0 {
            write!(f, " streams_moved={}", self.streams_moved)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::StepOutcome;

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

    #[test]
    fn a_wait_that_reached_its_bound_with_nothing_cut_is_a_clean_exit_naming_the_bound() {
        let bounded = ShutdownReport {
            steps: vec![StepReport {
                step: Step::WaitForConsumers,
                duration: Duration::from_secs(3),
                outcome: StepOutcome::TimedOut,
            }],
            ..Default::default()
        };
        assert!(!bounded.forced());
        assert_eq!(bounded.exit_code(), 0);
        let shown = bounded.to_string();
        assert!(
            shown.starts_with("clean") && shown.contains("(bound)"),
            "{shown}"
        );
    }
}
