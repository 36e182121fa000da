//! Start-up's first step: the admin endpoint, bound before anything else starts so
//! that `/live` and `/startup` answer while references are still being resolved, and
//! handed to the lifecycle to close last (shutdown step 6, after the drains).

use std::net::SocketAddr;

use crate::admin::{AdminServer, AdminState};

use super::{ApplicationBuilder, ApplicationError};

impl ApplicationBuilder {
    /// Binds and serves the admin endpoint (unless `admin.enabled` is false) and gives
    /// the lifecycle its closing; returns where it listens.
    ///
    /// # Errors
    /// [`ApplicationError::Admin`] naming `admin.port` (in use), `admin.host` or
    /// `admin.token`; nothing has started then.
    pub(super) fn start_admin(&self) -> Result<Option<SocketAddr>, ApplicationError> {
        let config = &self.config.admin;
        if !config.enabled {
            return Ok(None);
        }
        let references = self
            .references
            .iter()
            .map(|(channel, _)| channel.clone())
            .collect();
        let state = AdminState::new(
            self.lifecycle.clone(),
            references,
            self.metrics.clone(),
            config.token(),
        );
        let server = AdminServer::start(config, state)?;
        let addr = server.local_addr();
        tracing::info!(app = %self.lifecycle.name(), %addr, "admin endpoint listening");
        self.lifecycle.close_in_step_6(move || server.stop());
        Ok(Some(addr))
    }
}
