//! The application's spawner of the hot upgrade: the process mechanics of
//! `lossless_rpc::lifecycle::process::successor::ProcessSpawner`, plus what only the
//! application knows — the admin endpoint's listening socket, handed over as `admin`
//! next to the gRPC listener so that the new process answers on the same port.

use async_trait::async_trait;
use rpc_lifecycle::process::successor::ProcessSpawner;
use rpc_lifecycle::{Handoff, Spawner, Successor};
use rpc_transport::ADMIN_LISTENER;

use crate::admin::AdminListener;

/// Starts the new binary with the gRPC and the admin listeners.
pub(crate) struct ApplicationSpawner {
    process: ProcessSpawner,
    /// The admin endpoint's socket, when it is enabled.
    admin: Option<AdminListener>,
}

impl ApplicationSpawner {
    /// A spawner of `process`'s program that also hands over `admin`.
    pub(crate) fn new(process: ProcessSpawner, admin: Option<AdminListener>) -> Self {
        Self { process, admin }
    }
}

#[async_trait]
impl Spawner for ApplicationSpawner {
    async fn check(&self) -> Result<(), String> {
        self.process.check().await
    }

    fn spawn(&self, handoff: Handoff) -> Result<Box<dyn Successor>, String> {
        self.process.spawn(handoff)
    }

    fn binary(&self) -> Option<&std::path::Path> {
        self.process.binary()
    }

    /// Adds the admin listener while the endpoint serves (an endpoint that already
    /// stopped has nothing to hand over: the new process binds its own).
    fn complete(&self, handoff: &mut Handoff) -> Result<(), String> {
        let Some(duplicate) = self.admin.as_ref().and_then(AdminListener::duplicate) else {
            return Ok(());
        };
        let fd = duplicate
            .map_err(|error| format!("cannot duplicate the admin endpoint's socket: {error}"))?;
        handoff.listeners.listener(ADMIN_LISTENER, fd);
        Ok(())
    }
}
