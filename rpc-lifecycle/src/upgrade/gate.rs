//! One upgrade at a time, and never three generations: the small state machine every
//! trigger, the hand-over and the shutdown pass through, under one lock.
//!
//! ```text
//!   Idle ──trigger──▶ Running ──ready──▶ HandedOver (this process drains and exits)
//!    ▲                  │
//!    └──────failed──────┘
//!   Idle / Running ──shutdown──▶ ShuttingDown (a run under way is cut short)
//! ```
//!
//! Besides the state, a process that is itself a new generation refuses while its
//! predecessor is still alive (draining): otherwise a quick second upgrade would leave
//! three processes at once, as ecdysis allows.

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::upgrade_report::Refusal;
use rpc_core::Phase;

/// Where the upgrade machinery of one process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UpgradeStage {
    Idle,
    Running,
    HandedOver,
    ShuttingDown,
}

/// What a shutdown request finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtShutdown {
    /// Shut down as usual (an upgrade under way, if any, was told to stop).
    ShutDown,
    /// This process handed over already: it is draining, and the shutdown belongs to
    /// the new process.
    HandedOver,
}

#[derive(Debug)]
struct GateState {
    state: UpgradeStage,
    predecessor_alive: bool,
    /// Cancelled when a shutdown cuts the run under way short.
    cancel: CancellationToken,
}

/// The state machine (see the module documentation).
#[derive(Debug)]
pub(crate) struct UpgradeGate {
    inner: Mutex<GateState>,
}

impl UpgradeGate {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new(GateState {
                state: UpgradeStage::Idle,
                predecessor_alive: false,
                cancel: CancellationToken::new(),
            }),
        }
    }

    /// Claims the right to run an upgrade: its cancellation token (cancelled by a
    /// shutdown), or why not. Exactly one of any number of concurrent triggers wins.
    pub(crate) fn begin(&self, phase: Phase) -> Result<CancellationToken, Refusal> {
        let mut inner = self.inner.lock();
        match inner.state {
            UpgradeStage::Running => return Err(Refusal::InProgress),
            UpgradeStage::HandedOver => return Err(Refusal::HandedOver),
            UpgradeStage::ShuttingDown => return Err(Refusal::ShuttingDown),
            UpgradeStage::Idle => {}
        }
        if phase > Phase::Serving {
            return Err(Refusal::ShuttingDown);
        }
        if phase < Phase::Serving {
            return Err(Refusal::NotServing);
        }
        if inner.predecessor_alive {
            return Err(Refusal::PredecessorDraining);
        }
        inner.state = UpgradeStage::Running;
        inner.cancel = CancellationToken::new();
        Ok(inner.cancel.clone())
    }

    /// The run under way failed: the next trigger may start another.
    pub(crate) fn failed(&self) {
        let mut inner = self.inner.lock();
        if inner.state == UpgradeStage::Running {
            inner.state = UpgradeStage::Idle;
        }
    }

    /// The new process is ready: hand over, unless a shutdown came first (then the new
    /// process must be abandoned and the shutdown goes on).
    pub(crate) fn hand_over(&self) -> Result<(), Refusal> {
        let mut inner = self.inner.lock();
        match inner.state {
            UpgradeStage::Running => {
                inner.state = UpgradeStage::HandedOver;
                Ok(())
            }
            UpgradeStage::ShuttingDown => Err(Refusal::ShuttingDown),
            UpgradeStage::Idle | UpgradeStage::HandedOver => Err(Refusal::InProgress),
        }
    }

    /// A shutdown was asked for: stops a run under way (before its hand-over), and tells
    /// whether this process still shuts down itself.
    pub(crate) fn shutdown(&self) -> AtShutdown {
        let mut inner = self.inner.lock();
        match inner.state {
            UpgradeStage::HandedOver => AtShutdown::HandedOver,
            UpgradeStage::Running => {
                inner.state = UpgradeStage::ShuttingDown;
                inner.cancel.cancel();
                AtShutdown::ShutDown
            }
            UpgradeStage::Idle | UpgradeStage::ShuttingDown => {
                inner.state = UpgradeStage::ShuttingDown;
                AtShutdown::ShutDown
            }
        }
    }

    /// Why a manual offline or online cannot run now, if an upgrade owns the instance's
    /// registrations: one is under way (its new process is about to register them, or
    /// is registering them), this process handed them over already, or — in the new
    /// process — its predecessor still releases them. So the whole hand-over, on either
    /// side of it, takes no change; once the old process has exited the new one takes
    /// changes as usual.
    pub(crate) fn holds_registrations(&self) -> Option<Refusal> {
        let inner = self.inner.lock();
        match inner.state {
            UpgradeStage::Running => Some(Refusal::InProgress),
            UpgradeStage::HandedOver => Some(Refusal::HandedOver),
            UpgradeStage::Idle if inner.predecessor_alive => Some(Refusal::PredecessorDraining),
            UpgradeStage::Idle | UpgradeStage::ShuttingDown => None,
        }
    }

    /// Whether this process's predecessor (when it is a new generation) is alive.
    pub(crate) fn set_predecessor_alive(&self, alive: bool) {
        self.inner.lock().predecessor_alive = alive;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_at_a_time_and_a_failed_one_frees_the_gate() {
        let gate = UpgradeGate::new();
        assert!(gate.begin(Phase::Serving).is_ok());
        assert_eq!(gate.begin(Phase::Serving), Err(Refusal::InProgress));
        gate.failed();
        assert!(gate.begin(Phase::Serving).is_ok());
        assert_eq!(gate.hand_over(), Ok(()));
        assert_eq!(gate.begin(Phase::Serving), Err(Refusal::HandedOver));
        assert_eq!(gate.shutdown(), AtShutdown::HandedOver);
    }

    #[test]
    fn a_run_holds_the_registrations_from_its_claim_to_the_end() {
        let gate = UpgradeGate::new();
        assert_eq!(gate.holds_registrations(), None);
        gate.begin(Phase::Serving).unwrap();
        assert_eq!(gate.holds_registrations(), Some(Refusal::InProgress));
        gate.failed();
        assert_eq!(
            gate.holds_registrations(),
            None,
            "a failed run gives them back"
        );
        gate.begin(Phase::Serving).unwrap();
        gate.hand_over().unwrap();
        assert_eq!(gate.holds_registrations(), Some(Refusal::HandedOver));
        let successor = UpgradeGate::new();
        successor.set_predecessor_alive(true);
        assert_eq!(
            successor.holds_registrations(),
            Some(Refusal::PredecessorDraining),
            "the new process, while its predecessor releases them"
        );
        successor.set_predecessor_alive(false);
        assert_eq!(successor.holds_registrations(), None);
    }

    #[test]
    fn a_shutdown_cancels_the_run_and_its_hand_over() {
        let gate = UpgradeGate::new();
        let cancel = gate.begin(Phase::Serving).unwrap();
        assert_eq!(gate.shutdown(), AtShutdown::ShutDown);
        assert!(cancel.is_cancelled());
        assert_eq!(gate.hand_over(), Err(Refusal::ShuttingDown));
        assert_eq!(gate.begin(Phase::Serving), Err(Refusal::ShuttingDown));
    }

    #[test]
    fn refused_before_serving_after_shutdown_began_and_while_the_predecessor_drains() {
        let gate = UpgradeGate::new();
        assert_eq!(gate.begin(Phase::Starting), Err(Refusal::NotServing));
        assert_eq!(gate.begin(Phase::Rejecting), Err(Refusal::ShuttingDown));
        gate.set_predecessor_alive(true);
        assert_eq!(
            gate.begin(Phase::Serving),
            Err(Refusal::PredecessorDraining)
        );
        gate.set_predecessor_alive(false);
        assert!(gate.begin(Phase::Serving).is_ok());
    }
}
