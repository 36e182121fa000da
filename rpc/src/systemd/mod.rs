//! systemd integration: the notify protocol of `Type=notify` units
//! ([sd_notify(3)](https://www.freedesktop.org/software/systemd/man/latest/sd_notify.html)).
//!
//! A unit with `Type=notify` starts the process with `$NOTIFY_SOCKET` set and counts it
//! as started only when it says `READY=1`; `systemctl status` shows its last `STATUS=`.
//! Every [`Application`](crate::Application) tells systemd its phases (the phase
//! notifier, `phase_notifier.rs`, started by start-up), one datagram per phase entered:
//!
//! | phase entered | datagram |
//! |---|---|
//! | starting | `STATUS=starting` |
//! | serving (registered) | `READY=1`, `STATUS=serving` |
//! | unregistering (shutdown step 1) | `STOPPING=1`, `STATUS=unregistering`, `EXTEND_TIMEOUT_USEC=…` |
//! | each later shutdown step | `STATUS=<phase>`, `EXTEND_TIMEOUT_USEC=…` |
//! | stopped | `STATUS=stopped` (or `stopped before serving` after a failed start) |
//!
//! Without `$NOTIFY_SOCKET` nothing is sent and no task is started.
//! [`Application::wait`](crate::Application::wait) and
//! [`Application::before_shutdown`](crate::Application::before_shutdown) return only
//! once `stopped` has been told, so a `main` that exits right after them loses nothing.
//!
//! # The stop timeout
//!
//! systemd kills a stopping service once `TimeoutStopSec` has passed, even in the middle
//! of a drain. The process cannot read that value: systemd exports no variable carrying
//! it (the ones it sets are listed in systemd.exec(5), "Environment variables in spawned
//! processes"; the value is only a D-Bus property of the unit). It does not need to:
//! `EXTEND_TIMEOUT_USEC=N` means "expect my next message within N µs", and systemd only
//! ever moves its stop timer *later* — to `now + N` if that is after the timer's current
//! end, and only once the stop runs past `TimeoutStopSec` does the extension decide
//! (systemd.service(5), `TimeoutStopSec=`). So with every shutdown phase the notifier
//! sends the time left of this application's own `graceful_shutdown.timeout` plus
//! [`STOP_MARGIN`] (for the process to exit after its last step). Hence:
//! - a `TimeoutStopSec` shorter than the sequence needs no longer cuts a drain short;
//! - systemd still never waits longer than `graceful_shutdown.timeout` + [`STOP_MARGIN`]
//!   for a process whose sequence hangs;
//! - no setting has to repeat, or be kept in step with, the unit's `TimeoutStopSec`.
//!
//! # For the hot upgrade
//!
//! Every application with a notify socket also tells systemd its hot upgrades (the
//! upgrade notifier, `upgrade_notifier.rs`, called by the upgrade's sequence), which is
//! the reload protocol of `Type=notify-reload` (systemd ≥ 253) with
//! `ReloadSignal=SIGUSR2`:
//!
//! | when | datagram |
//! |---|---|
//! | an upgrade starts (any trigger) | `RELOADING=1`, `MONOTONIC_USEC=<now>` ([`notify_reloading`]) |
//! | the new process took over, before the old one stops accepting | `MAINPID=<new>` and `READY=1` in one datagram ([`notify_main_pid_ready`]) |
//! | the upgrade failed; the old process serves on | `READY=1` ([`notify_ready`]) |
//! | a SIGUSR2 refused while serving (upgrade turned off, a service manually offline, the previous generation still draining) | `RELOADING=1` + `MONOTONIC_USEC`, then `READY=1` |
//!
//! systemd sends SIGUSR2 for `systemctl reload`, then waits for `RELOADING=1` with a
//! `MONOTONIC_USEC` later than its signal and for the `READY=1` after it: so `systemctl
//! reload` returns once the upgrade is decided, and a refused one ends at once instead
//! of at the reload's timeout (`TimeoutStartSec`). systemd has no message for "the
//! reload failed": a failed or refused upgrade is in the journal, not in `systemctl
//! reload`'s exit status. On older systemd, see docs/operations.md (`ExecReload=` with
//! `kill`, which returns before the upgrade is decided).
//!
//! # Limits
//!
//! Messages go out through the `sd-notify` crate (pure Rust, no libsystemd), which
//! connects to a socket *path*; an abstract-namespace `$NOTIFY_SOCKET` (`@…`) fails to
//! send and is logged. systemd itself passes a path (`/run/systemd/notify`).

mod phase_notifier;
mod upgrade_notifier;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;

pub(crate) use phase_notifier::{NotifierFinished, notify_phases};
pub(crate) use upgrade_notifier::UpgradeNotifier;

/// Time the service manager is given beyond the end of the shutdown sequence's own
/// bound (`graceful_shutdown.timeout`), for the process to print its report and exit:
/// 5 s. Added to every `EXTEND_TIMEOUT_USEC`.
pub const STOP_MARGIN: Duration = Duration::from_secs(5);

/// Set once this process handed the main-PID role to its successor: from then on it no
/// longer speaks for the service, and systemd (with `NotifyAccess=main`) would refuse
/// what it says anyway.
static HANDED_OVER: AtomicBool = AtomicBool::new(false);

/// Whether this process was given a notify socket (`$NOTIFY_SOCKET` is set), i.e. runs
/// as a `Type=notify` (or `notify-reload`) systemd service.
pub fn notify_socket_set() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Tells systemd a reload (the hot upgrade) began: `RELOADING=1` with the current
/// `CLOCK_MONOTONIC` time as `MONOTONIC_USEC`. systemd then shows the unit as
/// "reloading" until `READY=1` ([`notify_main_pid_ready`] or [`notify_ready`]).
///
/// Does nothing without `$NOTIFY_SOCKET`.
///
/// # Errors
/// The operating system's error reading the clock or sending the datagram.
pub fn notify_reloading() -> io::Result<()> {
    let now = NotifyState::monotonic_usec_now()?;
    send(&[NotifyState::Reloading, now])
}

/// Tells systemd the service is ready (`READY=1`): ends a reload announced by
/// [`notify_reloading`] when the old process keeps serving (a failed upgrade).
/// Start-up's `READY=1` is sent by the phase notifier, not by this function.
///
/// Does nothing without `$NOTIFY_SOCKET`, or after [`notify_main_pid_ready`].
///
/// # Errors
/// The operating system's error sending the datagram.
pub fn notify_ready() -> io::Result<()> {
    send(&[NotifyState::Ready])
}

/// Hands the service over to process `pid`: `MAINPID=<pid>` and `READY=1` in **one**
/// datagram. With `NotifyAccess=main` only the main process may speak, so both must
/// come from this process while it still is the main one. Afterwards this process sends
/// nothing more (its phase notifier falls silent; the new process's speaks).
///
/// systemd accepts the new main PID only if that process belongs to the unit (a child
/// of this one does). Does nothing without `$NOTIFY_SOCKET`.
///
/// # Errors
/// The operating system's error sending the datagram; the hand-over did not happen.
pub fn notify_main_pid_ready(pid: u32) -> io::Result<()> {
    send(&[NotifyState::MainPid(pid), NotifyState::Ready])?;
    HANDED_OVER.store(true, Ordering::SeqCst);
    Ok(())
}

/// Sends one datagram of `states`, unless there is no notify socket or this process has
/// handed the service over.
fn send(states: &[NotifyState<'_>]) -> io::Result<()> {
    if HANDED_OVER.load(Ordering::SeqCst) {
        return Ok(());
    }
    sd_notify::notify(states)
}
