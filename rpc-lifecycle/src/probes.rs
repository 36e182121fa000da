//! The three probes an orchestrator asks (Kubernetes' liveness, startup and readiness;
//! dubbo-go's `/live`, `/startup`, `/ready`), answered from the phase and the manual
//! offline set. Each answer is a verdict and a one-line reason a person can act on.

use std::fmt;

use crate::{Lifecycle, Phase};

/// Which probe is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The process works: whoever asks got an answer from its runtime. Never tied to the
    /// registry or the phase, so a registry outage never gets a process restarted.
    Live,
    /// Start-up finished: references found, services bound, registered.
    Startup,
    /// Serving and online: false from the first shutdown step on, and while any
    /// provided service is manually offline.
    Ready,
}

/// A probe's verdict and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeAnswer {
    /// Whether the probe passes (HTTP 200) or not (503).
    pub passed: bool,
    /// One line saying why, e.g. `not ready: manually offline: helloworld.Greeter`.
    pub reason: String,
}

impl fmt::Display for ProbeAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl Lifecycle {
    /// Answers `probe` now (a few atomic loads and one short lock; never waits).
    pub fn probe(&self, probe: Probe) -> ProbeAnswer {
        let phase = self.phase();
        match probe {
            Probe::Live => pass(format!("live (phase {phase})")),
            Probe::Startup => self.startup(phase),
            Probe::Ready => self.readiness(phase),
        }
    }

    fn startup(&self, phase: Phase) -> ProbeAnswer {
        if phase >= Phase::Serving && self.was_serving() {
            return pass(format!("started (phase {phase})"));
        }
        match phase {
            Phase::Created => fail("not started: start-up has not begun".to_owned()),
            Phase::Starting => fail(
                "starting: references, services, readiness gates or registration not done yet"
                    .to_owned(),
            ),
            _ => fail(format!(
                "start-up did not finish: it failed or was interrupted (phase {phase})"
            )),
        }
    }

    fn readiness(&self, phase: Phase) -> ProbeAnswer {
        match phase {
            Phase::Serving => {
                let offline = self.offline_services();
                if offline.is_empty() {
                    pass("ready: serving and online".to_owned())
                } else {
                    fail(format!(
                        "not ready: manually offline: {}",
                        offline.join(", ")
                    ))
                }
            }
            Phase::Created | Phase::Starting => {
                fail(format!("not ready: starting (phase {phase})"))
            }
            _ => fail(format!("not ready: shutting down (phase {phase})")),
        }
    }

    /// Whether the application ever reached [`Phase::Serving`] (a failed start-up goes
    /// from starting to stopped).
    fn was_serving(&self) -> bool {
        self.phase_history()
            .iter()
            .any(|(phase, _)| *phase == Phase::Serving)
    }
}

fn pass(reason: String) -> ProbeAnswer {
    ProbeAnswer {
        passed: true,
        reason,
    }
}

fn fail(reason: String) -> ProbeAnswer {
    ProbeAnswer {
        passed: false,
        reason,
    }
}
