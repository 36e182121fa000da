//! What systemd hears of a hot upgrade (the table in the module above): `RELOADING=1`
//! with `MONOTONIC_USEC` when it begins, `MAINPID=<new>` with `READY=1` when the new
//! process took over, `READY=1` when it failed and this process goes on serving — and,
//! for a SIGUSR2 refused while serving, `RELOADING=1` then `READY=1` at once, so that a
//! `systemctl reload` (`Type=notify-reload`) ends instead of waiting for its timeout.

use rpc_lifecycle::{Refusal, UpgradeListener};

/// Tells systemd each upgrade's progress; a failure to send is logged, never fatal.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UpgradeNotifier;

impl UpgradeListener for UpgradeNotifier {
    fn started(&self) {
        log_failure("RELOADING=1", super::notify_reloading());
    }

    fn signal_refused(&self, refusal: Refusal) {
        if ends_the_reload(refusal) {
            log_failure("RELOADING=1", super::notify_reloading());
            log_failure("READY=1", super::notify_ready());
        }
    }

    fn failed(&self) {
        log_failure("READY=1", super::notify_ready());
    }

    fn handed_over(&self, pid: u32) {
        log_failure("MAINPID + READY=1", super::notify_main_pid_ready(pid));
    }
}

/// Whether a SIGUSR2 refused for `refusal` may have come from systemd asking for a
/// reload it now waits for. systemd sends its reload signal to the main process of a
/// running service only (systemd.service(5), `Type=notify-reload`), and waits for
/// `RELOADING=1` (with a `MONOTONIC_USEC` after its signal) and then `READY=1`, up to
/// `TimeoutStartSec`. Nothing else would end that reload: end it, with the refusal in
/// the journal.
fn ends_the_reload(refusal: Refusal) -> bool {
    match refusal {
        Refusal::Disabled
        | Refusal::TrafficChanging
        | Refusal::PredecessorDraining
        | Refusal::NotConfigured => true,
        // The upgrade under way ends the reload itself (`READY=1`, or `MAINPID` with
        // it); before serving, `READY=1` would announce a start not finished; during a
        // shutdown systemd stops the unit rather than reloads it; after the hand-over
        // this process no longer speaks for the unit.
        Refusal::InProgress | Refusal::NotServing | Refusal::ShuttingDown | Refusal::HandedOver => {
            false
        }
    }
}

fn log_failure(what: &str, result: std::io::Result<()>) {
    if let Err(error) = result {
        tracing::warn!(%error, notification = what, "systemd notification failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_while_serving_and_idle_ends_the_reload() {
        assert!(ends_the_reload(Refusal::Disabled));
        assert!(ends_the_reload(Refusal::PredecessorDraining));
        assert!(!ends_the_reload(Refusal::InProgress));
        assert!(!ends_the_reload(Refusal::NotServing));
    }
}
