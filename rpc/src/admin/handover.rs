//! The admin endpoint's listening socket, kept while the endpoint serves so that a hot
//! upgrade can hand a duplicate to the new process: it serves the same port (never a
//! re-bind), so no probe or `POST` is refused while one process gives way to the next.

use std::io;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use parking_lot::Mutex;

/// A handle on the admin endpoint's listening socket while it serves. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct AdminListener {
    socket: Arc<Mutex<Option<TcpListener>>>,
}

impl AdminListener {
    /// A handle holding `socket` (a duplicate of the served listener).
    pub(crate) fn serving(socket: TcpListener) -> Self {
        Self {
            socket: Arc::new(Mutex::new(Some(socket))),
        }
    }

    /// A new duplicate of the socket, for a child process; `None` once the endpoint
    /// stopped (the upgrade then hands over the gRPC listener alone).
    ///
    /// # Errors
    /// The operating system's error when the descriptor cannot be duplicated (out of
    /// descriptors).
    pub fn duplicate(&self) -> Option<io::Result<OwnedFd>> {
        let socket = self.socket.lock();
        let socket = socket.as_ref()?;
        Some(socket.try_clone().map(OwnedFd::from))
    }

    /// Closes this process's last hold on the socket (the endpoint stopped).
    pub(crate) fn close(&self) {
        self.socket.lock().take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_is_the_same_socket_until_closed() {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let handle = AdminListener::serving(socket);
        let duplicate = TcpListener::from(handle.duplicate().unwrap().unwrap());
        assert_eq!(duplicate.local_addr().unwrap(), addr);
        handle.close();
        assert!(handle.duplicate().is_none());
    }
}
