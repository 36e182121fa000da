//! SIGTERM / SIGINT start the shutdown sequence; a second one interrupts it; SIGUSR2
//! starts a hot upgrade (nginx's and pg_doorman's signal; `systemctl reload` sends it
//! with `Type=notify-reload` and `ReloadSignal=SIGUSR2`); SIGHUP is logged and otherwise
//! ignored (its default action would end the process).
//!
//! Which of them are handled is [`Handled`]: the shutdown's signals with
//! `internal_signal` (otherwise the application handles them and calls
//! `before_shutdown`); SIGUSR2 with `internal_signal` *or* an enabled upgrade, so that
//! the signal a service manager sends for a reload never takes its default action,
//! which ends the process (exit 140).

use std::future::pending;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::{Interrupt, Lifecycle};

/// Which signals a lifecycle handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handled {
    /// SIGTERM, SIGINT (the shutdown) and SIGHUP (ignored).
    pub(crate) shutdown: bool,
    /// SIGUSR2 (the hot upgrade, or a logged refusal when it is turned off).
    pub(crate) upgrade: bool,
}

impl Handled {
    /// Everything.
    pub(crate) const ALL: Handled = Handled {
        shutdown: true,
        upgrade: true,
    };

    /// What start-up installs: the shutdown's signals when `internal_signal` is on;
    /// SIGUSR2 then too, and whenever the upgrade is enabled.
    pub(crate) fn at_start(internal_signal: bool, upgrade_enabled: bool) -> Handled {
        Handled {
            shutdown: internal_signal,
            upgrade: internal_signal || upgrade_enabled,
        }
    }

    fn any(self) -> bool {
        self.shutdown || self.upgrade
    }
}

pub(crate) fn install(lifecycle: Lifecycle, handled: Handled) -> std::io::Result<()> {
    if !handled.any() {
        return Ok(());
    }
    let listen = |wanted: bool, kind: SignalKind| wanted.then(|| signal(kind)).transpose();
    let mut terminate = listen(handled.shutdown, SignalKind::terminate())?;
    let mut interrupt = listen(handled.shutdown, SignalKind::interrupt())?;
    let mut hangup = listen(handled.shutdown, SignalKind::hangup())?;
    let mut upgrade = listen(handled.upgrade, SignalKind::user_defined2())?;
    tokio::spawn(async move {
        let mut started = false;
        // (SIGUSR2 keeps being read after a shutdown began: the upgrade refuses it then,
        // rather than its default action killing the process.)
        loop {
            let received = tokio::select! {
                Some(()) = recv(&mut terminate) => Interrupt::Sigterm,
                Some(()) = recv(&mut interrupt) => Interrupt::Sigint,
                Some(()) = recv(&mut hangup) => {
                    tracing::info!(app = %lifecycle.name(), "SIGHUP received; it does not shut down");
                    continue;
                }
                Some(()) = recv(&mut upgrade) => {
                    if lifecycle.upgrade_signal_ignored() {
                        tracing::info!(app = %lifecycle.name(), "SIGUSR2 received; upgrade.signal is false: no upgrade");
                        continue;
                    }
                    tracing::info!(app = %lifecycle.name(), "SIGUSR2 received: a hot upgrade is asked for");
                    // The run logs its outcome (and a refusal with its reason: turned
                    // off, one under way, ...); nothing waits for it here.
                    drop(lifecycle.upgrade_by_signal());
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

/// The next delivery of `signal`; never, for a signal not handled.
async fn recv(signal: &mut Option<Signal>) -> Option<()> {
    match signal {
        Some(signal) => signal.recv().await,
        None => pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigusr2_is_handled_whenever_the_upgrade_is_on_or_the_framework_owns_signals() {
        let at_start = |internal, upgrade| {
            let handled = Handled::at_start(internal, upgrade);
            (handled.shutdown, handled.upgrade)
        };
        assert_eq!(at_start(true, true), (true, true));
        // The upgrade off: SIGUSR2 is still read (and refused, logged), never left to
        // its default action.
        assert_eq!(at_start(true, false), (true, true));
        // The application owns SIGTERM/SIGINT, but a reload's SIGUSR2 still upgrades.
        assert_eq!(at_start(false, true), (false, true));
        // Both off: no handler at all, as `internal_signal: false` promises.
        assert_eq!(at_start(false, false), (false, false));
        assert!(!Handled::at_start(false, false).any());
    }
}
