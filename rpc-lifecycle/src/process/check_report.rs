//! The configuration check's report: how a process started with `RPC_UPGRADE=check`
//! tells the old process whether its check passed.
//!
//! The old process gives the checking process one end of a Unix socket pair, named by
//! [`CHECK_FD_VAR`] (as the successor's hand-over channel is named by its own variable).
//! Start-up of the checking process writes one line of JSON on it before `start()`
//! returns — `"passed"` or `{"failed":"<the application's message>"}` — and closes it.
//! So whether the check passed does not depend on how the application's `main` turns a
//! start-up error into an exit code: `start()` returns `ApplicationError::Checked` for a
//! passed check, which `exit_code()` maps to 0, but a `main` written as the
//! getting-started guide shows exits 1 on any start error, and would fail every upgrade
//! if the exit code decided.
//!
//! The exit status is the fallback, used only when no report came: a binary that fails
//! before it reaches `start()` (its configuration file is unreadable: it exits 2), or one
//! that is not an rpc application of this version. Then 0 means passed, anything else
//! failed, with the tail of its standard error.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;

use serde::{Deserialize, Serialize};

use super::CHECK_FD_VAR;
use rpc_transport::fd::{Expect, adopt_named};

/// The outcome of a configuration check, as the checking process reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckReport {
    /// The configuration loaded, validated, and agrees with the code; nothing was
    /// started.
    Passed,
    /// It did not: the application's own message.
    Failed(String),
}

impl CheckReport {
    /// Sends this report to the old process, on the descriptor [`CHECK_FD_VAR`] names,
    /// and closes it. Does nothing when the variable is not set (a person ran
    /// `RPC_UPGRADE=check` by hand: the exit code is all there is). Call it at most once:
    /// the descriptor is adopted by the first call.
    ///
    /// # Errors
    /// When the descriptor is unusable or the write fails; the old process then decides
    /// by the exit status.
    pub fn send(&self) -> io::Result<()> {
        if std::env::var_os(CHECK_FD_VAR).is_none() {
            return Ok(());
        }
        let mut channel = UnixStream::from(adopt_named(CHECK_FD_VAR, Expect::Socket)?);
        let mut line = serde_json::to_string(self).map_err(io::Error::other)?;
        line.push('\n');
        // A short line on a fresh socket whose reader is waiting for it: the write does
        // not block for long.
        channel.write_all(line.as_bytes())?;
        channel.flush()
    }

    /// The report a line holds, if it holds one.
    pub(crate) fn parse(line: &str) -> Option<CheckReport> {
        serde_json::from_str(line.trim()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_one_line_and_reads_back() {
        for report in [
            CheckReport::Passed,
            CheckReport::Failed("key `protocol.port`:\nnot a number".to_owned()),
        ] {
            let line = serde_json::to_string(&report).unwrap();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(CheckReport::parse(&format!("{line}\n")), Some(report));
        }
        assert_eq!(CheckReport::parse(""), None);
        assert_eq!(CheckReport::parse("ready"), None);
    }
}
