//! Listening sockets passed from one process to the next, in systemd's socket-activation
//! convention ([sd_listen_fds(3)]): the sockets are descriptors 3, 4, ... of the new
//! process; `LISTEN_FDS` counts them, `LISTEN_FDNAMES` names them (colon-separated), and
//! `LISTEN_PID` holds the pid of the process they are meant for, so that a process
//! started by it does not take them too.
//!
//! Both ends are here: [`InheritedListeners`] takes them (a process started by systemd
//! with a `.socket` unit, or by the hot upgrade), and [`ListenFds`] hands them to a
//! child. Either way the *same* listening socket is served on: never a re-bind, so no
//! connection is refused while one process gives way to the next (both hold the socket;
//! whichever accepts a connection gets it).
//!
//! Names: the gRPC listener is [`GRPC_LISTENER`], the admin endpoint's
//! [`ADMIN_LISTENER`]. A single socket passed under any other name (systemd names it
//! after its `.socket` unit unless `FileDescriptorName=` says otherwise) serves gRPC.
//!
//! [sd_listen_fds(3)]: https://www.freedesktop.org/software/systemd/man/latest/sd_listen_fds.html

use std::io;
use std::net::TcpListener;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::OnceLock;

use command_fds::{CommandFdExt, FdMapping};
use parking_lot::Mutex;

use crate::fd::{Expect, adopt};

/// The name of the gRPC listener among inherited sockets.
pub const GRPC_LISTENER: &str = "grpc";
/// The name of the admin endpoint's listener among inherited sockets.
pub const ADMIN_LISTENER: &str = "admin";
/// The first inherited descriptor (`SD_LISTEN_FDS_START`).
pub const LISTEN_FDS_START: RawFd = 3;

/// The listening sockets this process was started with, each taken at most once.
#[derive(Debug, Default)]
pub struct InheritedListeners {
    listeners: Mutex<Vec<(String, TcpListener)>>,
}

impl InheritedListeners {
    /// The sockets of this process, read from the environment on first use (later calls
    /// return the same set, less what was taken).
    ///
    /// A descriptor that is not a listening TCP socket, or cannot be made non-blocking,
    /// is logged and left alone; none is taken when `LISTEN_PID` is not this process.
    pub fn global() -> &'static InheritedListeners {
        static GLOBAL: OnceLock<InheritedListeners> = OnceLock::new();
        GLOBAL.get_or_init(|| match Self::from_env() {
            Ok(listeners) => listeners,
            Err(error) => {
                tracing::warn!(%error, "ignoring LISTEN_FDS");
                Self::default()
            }
        })
    }

    /// Reads `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` and adopts the sockets.
    fn from_env() -> io::Result<Self> {
        // sd-notify checks LISTEN_PID against this process and names each descriptor
        // (`unknown` when LISTEN_FDNAMES is missing).
        let named = sd_notify::listen_fds_with_names()?;
        let mut listeners = Vec::new();
        for (fd, name) in named {
            match adopt_listener(fd) {
                Ok(listener) => {
                    tracing::info!(fd, %name, addr = ?listener.local_addr().ok(), "inherited a listening socket");
                    listeners.push((name, listener));
                }
                Err(error) => tracing::warn!(fd, %name, %error, "ignoring an inherited descriptor"),
            }
        }
        Ok(Self {
            listeners: Mutex::new(listeners),
        })
    }

    /// Takes the socket called `name`. For [`GRPC_LISTENER`], a lone socket of another
    /// name (not [`ADMIN_LISTENER`]) is taken too. `None` when there is none (left).
    pub fn take(&self, name: &str) -> Option<TcpListener> {
        let mut listeners = self.listeners.lock();
        let index = listeners.iter().position(|(n, _)| n == name).or_else(|| {
            let lone =
                name == GRPC_LISTENER && listeners.len() == 1 && listeners[0].0 != ADMIN_LISTENER;
            lone.then_some(0)
        })?;
        Some(listeners.remove(index).1)
    }

    /// How many sockets are left.
    pub fn len(&self) -> usize {
        self.listeners.lock().len()
    }

    /// Whether every socket was taken (or none was inherited).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Adopts `fd`, checks it is a listening TCP socket, and makes it non-blocking.
fn adopt_listener(fd: RawFd) -> io::Result<TcpListener> {
    listener_from(adopt(fd, Expect::Socket)?)
        .map_err(|error| io::Error::new(error.kind(), format!("fd {fd}: {error}")))
}

/// The listening TCP socket `fd` holds — one handed over within this process (a hot
/// upgrade's next generation started by `ApplicationBuilder::take_over`) — made
/// non-blocking.
///
/// # Errors
/// When `fd` is not a socket, or not a listening stream socket: a connected socket or
/// a UDP socket has no use here, and `accept` on it would fail later and far from the
/// cause.
pub fn listener_from(fd: OwnedFd) -> io::Result<TcpListener> {
    let listener = TcpListener::from(fd);
    let kind = socket2::SockRef::from(&listener);
    let listening = kind.is_listener().unwrap_or(false)
        && kind
            .r#type()
            .is_ok_and(|kind| kind == socket2::Type::STREAM)
        && kind
            .domain()
            .is_ok_and(|domain| domain == socket2::Domain::IPV4 || domain == socket2::Domain::IPV6);
    if !listening {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a listening TCP socket (a listening stream socket of IPv4 or IPv6)",
        ));
    }
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Sockets to hand to a child process as descriptors 3, 4, ... with their names, and
/// other descriptors after them (numbered for the child's environment).
#[derive(Debug, Default)]
pub struct ListenFds {
    listeners: Vec<(String, OwnedFd)>,
    extra: Vec<OwnedFd>,
}

impl ListenFds {
    /// Nothing to hand over yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a listening socket called `name` (`fd` is typically a duplicate of a
    /// server's listener, see [`ServerHandle::listener_fd`](super::ServerHandle::listener_fd)).
    pub fn listener(&mut self, name: impl Into<String>, fd: OwnedFd) -> &mut Self {
        self.listeners.push((name.into(), fd));
        self
    }

    /// Adds another descriptor, placed after the listeners; returns the number it will
    /// have in the child.
    pub fn extra(&mut self, fd: OwnedFd) -> RawFd {
        self.extra.push(fd);
        LISTEN_FDS_START + (self.listeners.len() + self.extra.len() - 1) as RawFd
    }

    /// Takes back the listener called `name`, for a new generation started in this
    /// same process (`ApplicationBuilder::take_over`), which serves on it instead of a
    /// child. `None` when there is none of that name (one of a custom network stack,
    /// which has no descriptor: its successor binds through the stack).
    pub fn take(&mut self, name: &str) -> Option<OwnedFd> {
        let at = self.listeners.iter().position(|(n, _)| n == name)?;
        Some(self.listeners.remove(at).1)
    }

    /// How many listeners there are.
    pub fn listener_count(&self) -> usize {
        self.listeners.len()
    }

    /// Maps every descriptor into `command`'s child (closed in this process once the
    /// command is dropped) and sets `LISTEN_FDS` and `LISTEN_FDNAMES`. `LISTEN_PID`
    /// must be the child's own pid, unknown until it is forked: the caller sets it in
    /// the child (see the hot upgrade's spawn, which runs the program through
    /// `/bin/sh`'s `exec` for that).
    ///
    /// Extra descriptors must be added *after* every listener: their numbers count
    /// from the last listener.
    ///
    /// # Errors
    /// When two descriptors would get the same number (cannot happen through this type).
    pub fn apply(self, command: &mut tokio::process::Command) -> io::Result<()> {
        let names: Vec<&str> = self.listeners.iter().map(|(n, _)| n.as_str()).collect();
        command
            .env("LISTEN_FDS", self.listeners.len().to_string())
            .env("LISTEN_FDNAMES", names.join(":"));
        let mappings = self
            .listeners
            .into_iter()
            .map(|(_, fd)| fd)
            .chain(self.extra)
            .enumerate()
            .map(|(index, parent_fd)| FdMapping {
                child_fd: LISTEN_FDS_START + index as RawFd,
                parent_fd,
            })
            .collect();
        command
            .fd_mappings(mappings)
            .map_err(|error| io::Error::other(error.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener_named(name: &str) -> (String, TcpListener) {
        (name.to_owned(), TcpListener::bind("127.0.0.1:0").unwrap())
    }

    #[test]
    fn a_listener_is_taken_by_name_once() {
        let inherited = InheritedListeners {
            listeners: Mutex::new(vec![listener_named("admin"), listener_named("grpc")]),
        };
        assert!(inherited.take("grpc").is_some());
        assert!(inherited.take("grpc").is_none());
        assert!(inherited.take("admin").is_some());
        assert!(inherited.is_empty());
    }

    #[test]
    fn a_lone_socket_of_another_name_serves_grpc_but_never_an_admin_socket() {
        let inherited = InheritedListeners {
            listeners: Mutex::new(vec![listener_named("greeter.socket")]),
        };
        assert!(inherited.take("grpc").is_some());
        let admin_only = InheritedListeners {
            listeners: Mutex::new(vec![listener_named("admin")]),
        };
        assert!(admin_only.take("grpc").is_none());
    }

    #[test]
    fn only_listening_stream_sockets_are_adopted() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let error = adopt_listener(std::os::fd::IntoRawFd::into_raw_fd(udp)).unwrap_err();
        assert!(error.to_string().contains("not a listening"), "{error}");
    }

    /// What a hand-over within one process may hold by mistake is refused by name,
    /// before anything is served on it.
    #[test]
    fn a_listener_handed_over_in_process_must_be_one() {
        let refused = |fd: OwnedFd| listener_from(fd).unwrap_err().to_string();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(refused(OwnedFd::from(udp)).contains("not a listening TCP socket"));
        let listening = TcpListener::bind("127.0.0.1:0").unwrap();
        let connected = std::net::TcpStream::connect(listening.local_addr().unwrap()).unwrap();
        assert!(refused(OwnedFd::from(connected)).contains("not a listening"));
        let (unix, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(refused(OwnedFd::from(unix)).contains("not a listening"));
        let dir = std::env::temp_dir().join(format!("rpc-listener-from-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let unix_listening = std::os::unix::net::UnixListener::bind(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert!(refused(OwnedFd::from(unix_listening)).contains("not a listening"));
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert!(refused(OwnedFd::from(file)).contains("not a listening"));
        assert!(listener_from(OwnedFd::from(listening)).is_ok());
    }

    #[test]
    fn extra_descriptors_are_numbered_after_the_listeners() {
        let mut fds = ListenFds::new();
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        fds.listener("grpc", OwnedFd::from(socket));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(fds.extra(OwnedFd::from(a)), 4);
    }
}
