//! The one module of rpc that touches raw file descriptors: it takes ownership of the
//! descriptors a parent process handed to this one by number (systemd's socket
//! activation, or the hot upgrade's predecessor).
//!
//! # Why `unsafe` is allowed here, and only here
//!
//! A descriptor inherited across `exec` is known only by its number (`LISTEN_FDS`
//! counts them from 3; the hot upgrade names two more in its environment). Rust's I/O
//! safety makes turning a number into an owned descriptor (`OwnedFd::from_raw_fd`) an
//! `unsafe` operation, because two owners of one number would close it twice, and a
//! number that is not open would be closed by mistake later. No crate can make that
//! safe for us (command-fds' `inherited` module asks its caller for an `unsafe` call at
//! the top of `main` instead). This module upholds the contract itself:
//! - a number is adopted at most once per process (`adopt` remembers every number it
//!   adopted and refuses a second adoption);
//! - the number must be open (`adopt` asks the kernel first, through a borrowed
//!   descriptor that closes nothing);
//! - inherited numbers belong to nobody else in this process: they were open before
//!   `main` ran, so nothing in this process opened them, and the only readers of the
//!   variables that name them are in this crate.
//!
//! The rest of the workspace keeps `#![forbid(unsafe_code)]`; this crate denies it, and
//! allows it in this file alone (a test checks that no other file does). Outside this
//! crate a descriptor is adopted only by the name of the variable that carries its
//! number ([`adopt_named`]: the hot upgrade's channel and standard error), never by a
//! number a caller chose.

#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};
use parking_lot::Mutex;

/// Every number adopted so far in this process.
static ADOPTED: Mutex<BTreeSet<RawFd>> = Mutex::new(BTreeSet::new());

/// What an adopted descriptor must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Any open descriptor (e.g. an inherited standard error).
    Any,
    /// A socket (listeners, the hot upgrade's hand-over channel).
    Socket,
}

/// Takes ownership of the inherited descriptor `fd`, marked close-on-exec so that it
/// leaks into no process this one starts.
///
/// # Errors
/// `InvalidInput` when `fd` is a standard stream (0, 1, 2), was adopted before, or is
/// not what `expect` asks; the operating system's error when it is not open.
pub(crate) fn adopt(fd: RawFd, expect: Expect) -> io::Result<OwnedFd> {
    if fd <= 2 {
        return Err(invalid(format!("fd {fd} is a standard stream")));
    }
    let mut adopted = ADOPTED.lock();
    if adopted.contains(&fd) {
        return Err(invalid(format!("fd {fd} was already taken")));
    }
    // SAFETY: the borrow lives only for these checks and closes nothing; fcntl and
    // fstat on a number that is not open fail with EBADF, which is returned.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    fcntl(borrowed, FcntlArg::F_GETFD)?;
    if expect == Expect::Socket {
        let stat = fstat(borrowed)?;
        let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
        if kind != SFlag::S_IFSOCK {
            return Err(invalid(format!("fd {fd} is not a socket")));
        }
    }
    fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    adopted.insert(fd);
    // SAFETY: `fd` is open (checked above), was inherited (see the module
    // documentation: nothing else in this process owns it), and is adopted once (the
    // set above, under its lock).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Takes ownership of the inherited descriptor whose number the environment variable
/// `var` holds (set by the parent before `exec`), as `adopt` does.
///
/// # Errors
/// `NotFound` when `var` is not set, `InvalidData` when it holds no number, and
/// `adopt`'s errors.
pub fn adopt_named(var: &str, expect: Expect) -> io::Result<OwnedFd> {
    let value = std::env::var(var).map_err(|_| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{var} is not set (started as a successor without a hand-over channel?)"),
        )
    })?;
    let fd: RawFd = value.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{var}={value:?} is not a descriptor number"),
        )
    })?;
    adopt(fd, expect)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, IntoRawFd};

    use super::*;

    #[test]
    fn a_socket_is_adopted_once_and_becomes_close_on_exec() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let raw = listener.into_raw_fd();
        let fd = adopt(raw, Expect::Socket).unwrap();
        assert_eq!(fd.as_raw_fd(), raw);
        let flags = fcntl(&fd, FcntlArg::F_GETFD).unwrap();
        assert!(FdFlag::from_bits_truncate(flags).contains(FdFlag::FD_CLOEXEC));
        let again = adopt(raw, Expect::Socket).unwrap_err();
        assert!(again.to_string().contains("already taken"), "{again}");
        // Give the number back so no later test can mistake it for an inheritance.
        ADOPTED.lock().remove(&raw);
    }

    #[test]
    fn standard_streams_and_files_posing_as_sockets_are_refused() {
        assert!(adopt(2, Expect::Any).is_err());
        // (A closed number is not tried: tests run in parallel, and another test's
        // descriptor could take that number meanwhile.)
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let error = adopt(file.as_raw_fd(), Expect::Socket).unwrap_err();
        assert!(error.to_string().contains("not a socket"), "{error}");
    }
}
