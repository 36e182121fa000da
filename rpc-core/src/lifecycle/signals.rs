//! SIGTERM / SIGINT start the shutdown sequence; a second one interrupts it; SIGHUP is
//! logged and otherwise ignored (its default action would end the process).

use tokio::signal::unix::{SignalKind, signal};

use super::{Interrupt, Lifecycle};

pub(crate) fn install(lifecycle: Lifecycle) -> std::io::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        let mut started = false;
        loop {
            let received = tokio::select! {
                Some(()) = terminate.recv() => Interrupt::Sigterm,
                Some(()) = interrupt.recv() => Interrupt::Sigint,
                Some(()) = hangup.recv() => {
                    tracing::info!(app = %lifecycle.name(), "SIGHUP received; it does not shut down");
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
