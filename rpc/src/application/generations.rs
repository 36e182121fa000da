//! Generations in one process: an application whose hot upgrade starts its successor
//! its own way (a new `Application` in this process, a container runtime, …) instead
//! of a new process of the same binary, and the successor's side of it.
//!
//! The fleet simulator upgrades providers this way on simulated hosts; a program with
//! a process model of its own can too. The sequence is the hot upgrade's
//! ([`crate::upgrade`]): the new generation registers the same instance ids and says
//! ready, only then does the old one stop accepting, give its registrations up without
//! withdrawing them, drain and end.

use std::sync::Arc;

use rpc_lifecycle::{Handoff, Spawner};

use super::ApplicationBuilder;

impl ApplicationBuilder {
    /// Starts the next generation of this application with `spawner` when it is
    /// upgraded (SIGUSR2, `POST /upgrade`, [`Application::upgrade`](crate::Application::upgrade)),
    /// instead of a new process of this binary (`upgrade.binary` is then unused;
    /// `upgrade.enabled` and `ready_timeout` apply as ever). The spawner is given the
    /// [`Handoff`] (the gRPC listener's descriptor when it has one, the instances
    /// registered and those manually offline); the successor it starts should be an
    /// application built with [`take_over`](Self::take_over) of it. The admin
    /// endpoint's listener is not handed over this way: the successor binds its own.
    pub fn upgrade_spawner(&mut self, spawner: Arc<dyn Spawner>) -> &mut Self {
        self.upgrade.set_spawner(spawner);
        self
    }

    /// Makes this application the next generation of the one in this process that
    /// handed over `handoff` (to the [`Spawner`] given to its
    /// [`upgrade_spawner`](Self::upgrade_spawner)): it serves on the gRPC listener the
    /// handoff holds (for a custom network stack, none: it binds the same address
    /// through the stack, which shares the listener, see
    /// [`NetworkStack`](rpc_transport::NetworkStack)), registers its services under
    /// the previous generation's instance ids, and keeps those the operator had taken
    /// offline offline.
    ///
    /// Start-up fails with [`ApplicationError::Upgrade`](crate::ApplicationError::Upgrade)
    /// when the handed-over listener is not usable. To refuse upgrades of this
    /// generation until the previous one has ended, call
    /// [`Lifecycle::predecessor_alive`](rpc_lifecycle::Lifecycle::predecessor_alive)
    /// once it started, with a future the previous generation's end resolves.
    pub fn take_over(&mut self, handoff: Handoff) -> &mut Self {
        self.upgrade.set_handoff(handoff);
        self
    }
}
