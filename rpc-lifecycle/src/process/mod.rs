//! The mechanics of the hot upgrade, below its sequence (`lifecycle::upgrade`): starting
//! the new binary with the listening sockets ([`successor`], the old process's side),
//! and what the new process does with what it was given ([`predecessor`], its side).
//!
//! # What passes from one generation to the next
//!
//! | what | how | why |
//! |---|---|---|
//! | listening sockets | descriptors 3, 4, ... in systemd's `LISTEN_FDS` convention (`transport::ListenFds`) | the same socket, never a re-bind: no dial is refused |
//! | `LISTEN_PID` | set to the child's own pid by `/bin/sh`'s `exec` (see [`successor`]) | the convention: a process started by the new one must not take the sockets |
//! | the hand-over channel | one end of a Unix socket pair, [`CHANNEL_FD_VAR`] | the child writes `ready`; the old process holds its end until it exits, so the child reads EOF when its predecessor is gone |
//! | the original standard error | a descriptor, [`STDERR_FD_VAR`] | until ready the child's stderr is a file the old process reads the tail of when the start fails; once ready the child puts the original back on fd 2 and its logs go where they always went |
//! | the instance ids | JSON, [`INSTANCES_VAR`] | the new process registers the *same* instances (registry continuity) |
//! | the instances manually offline | JSON, [`OFFLINE_VAR`] | the new process starts them offline, under the same ids: the operator's `POST /offline` holds across the upgrade |
//! | the role | [`ROLE_VAR`] = `check` or `successor` | `check` only loads and validates the configuration, starts nothing, and exits (pg_doorman's `-t`) |
//! | the check's report | one end of another Unix socket pair, [`CHECK_FD_VAR`] (a `check` only) | the checking process writes `passed` or `failed` with its message before `start()` returns ([`check_report`]): the outcome does not depend on the exit code `main` chooses; the exit status decides only when no report came |
//!
//! Every other descriptor of the old process is close-on-exec (Rust opens everything
//! so), so nothing else leaks into the new process.
//!
//! **The variables are for the new process alone.** They stay in its environment —
//! removing a variable is `unsafe` in a multi-threaded process (`std::env::remove_var`),
//! and every process of ours is one — so they are bound to it the way systemd binds
//! `LISTEN_FDS`: [`Role::current`] reads [`Role::Successor`] only when `LISTEN_PID` is
//! this process's pid. A process the new one starts in turn (a helper, a shell, another
//! rpc application) inherits the variables with its parent's pid in `LISTEN_PID`, reads
//! itself as [`Role::Plain`], and adopts nothing. [`Role::Check`] adopts no socket and
//! starts nothing, and is also what a person sets by hand (`RPC_UPGRADE=check app`, to
//! check a configuration): it is read whatever `LISTEN_PID` says.

pub mod check_report;
pub mod predecessor;
mod stderr;
pub mod successor;

use std::ffi::OsString;
use std::path::PathBuf;

/// What this process is in a hot upgrade: the value of [`ROLE_VAR`].
pub const ROLE_VAR: &str = "RPC_UPGRADE";
/// The descriptor of the hand-over channel, in a successor.
pub const CHANNEL_FD_VAR: &str = "RPC_UPGRADE_CHANNEL_FD";
/// The descriptor of the original standard error, in a successor.
pub const STDERR_FD_VAR: &str = "RPC_UPGRADE_STDERR_FD";
/// The instances the predecessor had registered (JSON array of `Instance`), in a
/// successor.
pub const INSTANCES_VAR: &str = "RPC_UPGRADE_INSTANCES";
/// The instances of services manually offline in the predecessor (JSON array of
/// `Instance`), in a successor.
pub const OFFLINE_VAR: &str = "RPC_UPGRADE_OFFLINE";
/// The descriptor the configuration check reports its outcome on, in a process started
/// with [`ROLE_VAR`] = `check` (see [`check_report`]).
pub const CHECK_FD_VAR: &str = "RPC_UPGRADE_CHECK_FD";
/// Every variable of this module: removed from a child's environment before the ones
/// meant for it are set, so that nothing stale passes on.
pub const ALL_VARS: [&str; 6] = [
    ROLE_VAR,
    CHANNEL_FD_VAR,
    STDERR_FD_VAR,
    INSTANCES_VAR,
    OFFLINE_VAR,
    CHECK_FD_VAR,
];

/// What this process was started as, read from [`ROLE_VAR`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Started normally (by a person, a script, systemd).
    Plain,
    /// Started by an upgrade to check its configuration only: load and validate it,
    /// start nothing, report the outcome ([`check_report`]) and exit.
    Check,
    /// Started by an upgrade to take over: serve on the inherited sockets, register the
    /// same instances, then report ready.
    Successor,
}

impl Role {
    /// This process's role: [`ROLE_VAR`] — for a successor only when `LISTEN_PID` says
    /// the variables are this process's own (see the module documentation).
    pub fn current() -> Role {
        let own = std::env::var("LISTEN_PID")
            .ok()
            .and_then(|pid| pid.trim().parse::<u32>().ok())
            == Some(std::process::id());
        Self::read(std::env::var(ROLE_VAR).ok().as_deref(), own)
    }

    /// The role `value` names, if the variables are this process's (`own`).
    fn read(value: Option<&str>, own: bool) -> Role {
        match value {
            Some("check") => Role::Check,
            Some("successor") if own => Role::Successor,
            Some("successor") => {
                tracing::info!(
                    "{ROLE_VAR}=successor was inherited from another process (LISTEN_PID is not this one's): starting as a plain process"
                );
                Role::Plain
            }
            _ => Role::Plain,
        }
    }

    fn value(self) -> Option<&'static str> {
        match self {
            Role::Plain => None,
            Role::Check => Some("check"),
            Role::Successor => Some("successor"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Role;

    #[test]
    fn a_role_is_read_only_from_the_variables_of_this_process() {
        assert_eq!(Role::read(Some("successor"), true), Role::Successor);
        assert_eq!(Role::read(Some("check"), true), Role::Check);
        assert_eq!(
            Role::read(Some("successor"), false),
            Role::Plain,
            "inherited from a parent that was a successor: not this process's"
        );
        assert_eq!(
            Role::read(Some("check"), false),
            Role::Check,
            "set by hand to check a configuration"
        );
        assert_eq!(Role::read(None, true), Role::Plain);
    }
}

/// The program a hot upgrade starts: a binary and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The file to execute.
    pub binary: PathBuf,
    /// Its arguments (without `argv[0]`).
    pub args: Vec<OsString>,
}

impl Program {
    /// This process's own program as it was started: the path of its executable, read
    /// now, and its arguments.
    ///
    /// Read it at start-up. On Linux the path comes from `/proc/self/exe`, which names
    /// the file this process runs: once that file is replaced on disk (a deploy that
    /// installs the new build over it), the link names the *old* inode, as
    /// `/usr/local/bin/app (deleted)`. The path read at start-up is the file's name, so
    /// executing it later runs whatever file has that name then: the new build. (A
    /// deploy that switches a symbolic link should configure `upgrade.binary` as the
    /// link's path: `/proc/self/exe` names the link's target.)
    ///
    /// # Errors
    /// When the executable's path cannot be read.
    pub fn current() -> std::io::Result<Program> {
        Ok(Program {
            binary: std::env::current_exe()?,
            args: std::env::args_os().skip(1).collect(),
        })
    }
}
