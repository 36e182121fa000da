//! What systemd hears of a hot upgrade (the table in the module above): `RELOADING=1`
//! with `MONOTONIC_USEC` when it begins, `MAINPID=<new>` with `READY=1` when the new
//! process took over, `READY=1` when it failed and this process goes on serving.

use rpc_lifecycle::UpgradeListener;

/// Tells systemd each upgrade's progress; a failure to send is logged, never fatal.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UpgradeNotifier;

impl UpgradeListener for UpgradeNotifier {
    fn started(&self) {
        log_failure("RELOADING=1", super::notify_reloading());
    }

    fn failed(&self) {
        log_failure("READY=1", super::notify_ready());
    }

    fn handed_over(&self, pid: u32) {
        log_failure("MAINPID + READY=1", super::notify_main_pid_ready(pid));
    }
}

fn log_failure(what: &str, result: std::io::Result<()>) {
    if let Err(error) = result {
        tracing::warn!(%error, notification = what, "systemd notification failed");
    }
}
