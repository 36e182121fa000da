//! The steps of the two sequences — the shutdown's [`Step`] and the hot upgrade's
//! [`UpgradeStep`] — and what every step of either reports: how it ended
//! ([`StepOutcome`]) and how long it took ([`StepReport`]).
//!
//! A step's name is written once, in the table each enum is declared with
//! (`steps!`): the report, the logs, the metrics' labels and the step's `tracing` span
//! all use it, so they cannot disagree.

use std::fmt;
use std::time::Duration;

use rpc_core::Phase;
use serde::{Deserialize, Serialize};

/// A kind of step in a lifecycle sequence, as the sequence runner (`sequence.rs`)
/// drives it.
pub(crate) trait SequenceStep: Copy + fmt::Display {
    /// The phase the application enters when the step begins (phases only move
    /// forward, so a step whose phase was already reached leaves it as it is).
    fn phase(self) -> Phase;

    /// A span named for the step, with an empty `outcome` field that the runner fills
    /// when the step ends.
    fn span(self) -> tracing::Span;
}

/// Declares a step enum from one table of `Variant => "name" => Phase`: its `Display`
/// (the name), its span (named so: `tracing` span names must be literals) and the
/// phase it enters.
macro_rules! steps {
    (
        $(#[$meta:meta])*
        pub enum $step:ident {
            $( $(#[$variant_meta:meta])* $variant:ident => $name:literal => $phase:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum $step {
            $( $(#[$variant_meta])* $variant ),*
        }

        impl $step {
            /// Every step, in order.
            pub const ALL: [$step; [$($name),*].len()] = [$(Self::$variant),*];
        }

        impl fmt::Display for $step {
            /// The step's name, as reports, logs and metrics' labels show it.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $(Self::$variant => $name),*
                })
            }
        }

        impl SequenceStep for $step {
            fn phase(self) -> Phase {
                match self {
                    $(Self::$variant => $phase),*
                }
            }

            fn span(self) -> tracing::Span {
                match self {
                    $(Self::$variant => tracing::info_span!($name, outcome = tracing::field::Empty)),*
                }
            }
        }
    };
}

steps! {
    /// The seven steps of graceful offline, in the order they run.
    pub enum Step {
        /// 1. Withdraw every registration (subscriptions stay).
        Unregister => "unregister" => Phase::Unregistering,
        /// 2. Wait until consumers stop sending (or the bound).
        WaitForConsumers => "wait-for-consumers" => Phase::WaitingForConsumers,
        /// 3. Refuse new requests as "closing, not executed".
        RejectNew => "reject-new" => Phase::Rejecting,
        /// 4. Wait for inbound requests in flight.
        DrainInbound => "drain-inbound" => Phase::DrainingInbound,
        /// 5. Wait for outbound requests in flight.
        DrainOutbound => "drain-outbound" => Phase::DrainingOutbound,
        /// 6. Close listeners, connections (GOAWAY), channels, subscriptions, registries.
        DestroyProtocols => "destroy-protocols" => Phase::Destroying,
        /// 7. Run the application's shutdown callbacks.
        Callbacks => "callbacks" => Phase::Callbacks,
    }
}

steps! {
    /// The steps of a hot upgrade, in the order they run (`Lifecycle::upgrade`). The
    /// old process serves as before until the new one took over (hand-over).
    pub enum UpgradeStep {
        /// Accepted the trigger (SIGUSR2 or the admin endpoint); told systemd it reloads.
        Trigger => "trigger" => Phase::Serving,
        /// The new binary loaded and validated its configuration, starting nothing.
        Check => "check" => Phase::Serving,
        /// The new binary was started with the listening sockets and the hand-over channel.
        Spawn => "spawn" => Phase::Serving,
        /// The new process started as any instance does and reported ready.
        WaitReady => "wait-ready" => Phase::Serving,
        /// This process stopped accepting and gave up its registrations without withdrawing
        /// them; systemd's main pid moved to the new process.
        HandOver => "hand-over" => Phase::HandedOver,
        /// GOAWAY on every connection, requests and streams in flight finished (bounded as
        /// in the shutdown), references and registry clients closed.
        Drain => "drain" => Phase::HandedOver,
        /// The application's shutdown callbacks ran; the process exits.
        Exit => "exit" => Phase::Callbacks,
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
    /// It could not do what it had to (a hot upgrade's check or start failed). The
    /// shutdown's steps never fail: they wait, at most to their bound.
    Failed,
}

impl StepOutcome {
    /// Every outcome.
    pub const ALL: [StepOutcome; 4] =
        [Self::Completed, Self::TimedOut, Self::Skipped, Self::Failed];
}

impl fmt::Display for StepOutcome {
    /// As serialized: `completed`, `timed-out`, `skipped`, `failed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Completed => "completed",
            Self::TimedOut => "timed-out",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
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

impl<S: fmt::Display> fmt::Display for StepReport<S> {
    /// `name=12ms`, with ` (bound)`, ` (skipped)` or ` (failed)` when it did not
    /// complete: the form both reports list their steps in.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.outcome {
            StepOutcome::Completed => "",
            StepOutcome::TimedOut => " (bound)",
            StepOutcome::Skipped => " (skipped)",
            StepOutcome::Failed => " (failed)",
        };
        write!(f, "{}={}ms{mark}", self.step, self.duration.as_millis())
    }
}

/// Writes `steps` as a report lists them: each ` name=12ms`, in order.
pub(crate) fn write_steps<S: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    steps: &[StepReport<S>],
) -> fmt::Result {
    for step in steps {
        write!(f, " {step}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_name_is_its_display_and_its_serialized_form() {
        for step in Step::ALL {
            let json = serde_json::to_string(&step).unwrap();
            assert_eq!(json, format!("\"{step}\""));
        }
        for step in UpgradeStep::ALL {
            let json = serde_json::to_string(&step).unwrap();
            assert_eq!(json, format!("\"{step}\""));
        }
        assert_eq!(Step::ALL.len(), 7);
        assert_eq!(UpgradeStep::ALL.len(), 7);
    }

    #[test]
    fn a_step_line_marks_what_did_not_complete() {
        let line = StepReport {
            step: Step::DrainInbound,
            duration: Duration::from_millis(12),
            outcome: StepOutcome::TimedOut,
        };
        assert_eq!(line.to_string(), "drain-inbound=12ms (bound)");
    }
}
