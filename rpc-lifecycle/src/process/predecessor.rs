//! The new process's side of the hot upgrade: what its predecessor handed it (see the
//! table in the module above), how it says `ready`, and how it learns that the
//! predecessor is gone.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream as StdUnixStream;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::successor::READY_LINE;
use super::{CHANNEL_FD_VAR, INSTANCES_VAR, OFFLINE_VAR, Role, STDERR_FD_VAR};
use rpc_core::Instance;
use rpc_transport::fd::{Expect, adopt_named};

/// What the old process handed to this one, when this process is its successor.
#[derive(Debug)]
pub struct Predecessor {
    channel: UnixStream,
    original_stderr: Option<OwnedFd>,
    instances: Vec<Instance>,
    offline: Vec<Instance>,
}

impl Predecessor {
    /// The hand-over of this process, if it was started as a successor
    /// ([`Role::Successor`]). Call it once, at start-up: the descriptors are adopted
    /// once.
    ///
    /// # Errors
    /// When this process is a successor but the variables or descriptors are missing or
    /// wrong (it cannot then tell its predecessor it is ready: it must fail its start).
    ///
    /// # Panics
    /// Outside a tokio runtime (the channel is registered with it).
    pub fn from_env() -> io::Result<Option<Predecessor>> {
        if Role::current() != Role::Successor {
            return Ok(None);
        }
        let channel = adopt_named(CHANNEL_FD_VAR, Expect::Socket)?;
        let channel = StdUnixStream::from(channel);
        channel.set_nonblocking(true)?;
        let original_stderr = match std::env::var(STDERR_FD_VAR) {
            Ok(_) => Some(adopt_named(STDERR_FD_VAR, Expect::Any)?),
            Err(_) => None,
        };
        Ok(Some(Predecessor {
            channel: UnixStream::from_std(channel)?,
            original_stderr,
            instances: instances_in(INSTANCES_VAR)?,
            offline: instances_in(OFFLINE_VAR)?,
        }))
    }

    /// The instances the predecessor registered: this process registers the same ones
    /// (same ids), so the registry never goes without them.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// The instances of the services the predecessor had manually offline: this process
    /// starts them offline, under the same ids, and registers them only when an
    /// operator brings them online.
    pub fn offline(&self) -> &[Instance] {
        &self.offline
    }

    /// Tells the predecessor this process serves: first puts the original standard
    /// error back on fd 2 (from now on the predecessor no longer reads the capture file,
    /// and may exit), then writes `ready`. Returns a [`PredecessorAlive`] that resolves
    /// when the predecessor has exited.
    ///
    /// # Errors
    /// When the channel is broken (the predecessor is gone: it gave up on this process
    /// and killed it, or died).
    pub async fn announce_ready(mut self) -> io::Result<PredecessorAlive> {
        if let Some(original) = self.original_stderr.take() {
            nix::unistd::dup2_stderr(&original)?;
        }
        self.channel
            .write_all(format!("{READY_LINE}\n").as_bytes())
            .await?;
        self.channel.flush().await?;
        Ok(PredecessorAlive {
            channel: self.channel,
        })
    }
}

/// The instances the JSON of variable `var` holds (none when it is not set).
fn instances_in(var: &str) -> io::Result<Vec<Instance>> {
    match std::env::var(var) {
        Ok(json) => serde_json::from_str(&json)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, format!("{var}: {error}"))),
        Err(_) => Ok(Vec::new()),
    }
}

/// The predecessor, until it exits (its end of the channel closes with it).
#[derive(Debug)]
pub struct PredecessorAlive {
    channel: UnixStream,
}

impl PredecessorAlive {
    /// Resolves once the predecessor has exited (or closed its end), and closes this
    /// process's end.
    pub async fn gone(mut self) {
        let mut buffer = [0u8; 64];
        // The predecessor never writes; anything read is ignored. EOF or an error both
        // mean it is gone.
        while let Ok(read) = self.channel.read(&mut buffer).await {
            if read == 0 {
                break;
            }
        }
    }
}
