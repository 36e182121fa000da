//! SIGTERM / SIGINT start the shutdown sequence; a second one interrupts it; SIGUSR2
//! starts a hot upgrade (nginx's and pg_doorman's signal; `systemctl reload` sends it
//! with `ExecReload=kill -USR2 $MAINPID`); SIGHUP is logged and otherwise ignored (its
//! default action would end the process).

use tokio::signal::unix::{SignalKind, signal};

use crate::{Interrupt, Lifecycle};

pub(crate) fn install(lifecycle: Lifecycle) -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut upgrade = signal(SignalKind::user_defined2())?;
    tokio::spawn(async move {
        let mut started = false;
        // (SIGUSR2 keeps being read after a shutdown began: the upgrade refuses it then,
        // rather than its default action killing the process.)
        loop {
            let received = tokio::select! {
                Some(()) = terminate.recv() => Interrupt::Sigterm,
                Some(()) = interrupt.recv() => Interrupt::Sigint,
                Some(()) = hangup.recv() => {
                    tracing::info!(app = %lifecycle.name(), "SIGHUP received; it does not shut down");
                    continue;
                }
                Some(()) = upgrade.recv() => {
                    tracing::info!(app = %lifecycle.name(), "SIGUSR2 received: starting a hot upgrade");
                    // The run logs its outcome (and refuses, saying why, when one is
                    // under way); nothing waits for it here.
                    drop(lifecycle.upgrade());
                    continue;
                }
                else => return,
            };
            if started {
                tracing::warn!(app = %lifecycle.name(), signal = ?received, "second signal: skipping the rest of shutdown");
                lifecycle.interrupt(received);
                return;
            }
            started = true;
            tracing::info!(app = %lifecycle.name(), signal = ?received, "signal received: starting graceful shutdown");
            drop(lifecycle.before_shutdown());
        }
    });
    Ok(())
}
