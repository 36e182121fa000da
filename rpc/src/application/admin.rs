//! Start-up's first step: the admin endpoint, bound before anything else starts so
//! that `/live` and `/startup` answer while references are still being resolved, and
//! handed to the lifecycle to close last (shutdown step 6, after the drains).
//!
//! A process started by a hot upgrade (or by systemd socket activation with a socket
//! named `admin`) serves the listener it inherited instead of binding one: the same
//! port, with no moment where a probe is refused.

use std::net::{SocketAddr, TcpListener};

use rpc_transport::{ADMIN_LISTENER, InheritedListeners};

use crate::admin::{AdminConfig, AdminError, AdminListener, AdminServer, AdminState};

use super::{ApplicationBuilder, ApplicationError};

/// The admin endpoint once it serves.
pub(super) struct AdminStarted {
    /// Where it listens.
    pub(super) addr: SocketAddr,
    /// Its listening socket, for a hot upgrade to hand over.
    pub(super) listener: AdminListener,
}

impl ApplicationBuilder {
    /// Binds (or inherits) and serves the admin endpoint (unless `admin.enabled` is
    /// false) and gives the lifecycle its closing.
    ///
    /// # Errors
    /// [`ApplicationError::Admin`] naming `admin.port` (in use), `admin.host`,
    /// `admin.token` or `admin.allowed_hosts`; nothing has started then.
    pub(super) fn start_admin(&self) -> Result<Option<AdminStarted>, ApplicationError> {
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
        )
        .with_allowed_hosts(&config.allowed_hosts)?;
        let listener = admin_listener(config, self.config.origin())?;
        let server = AdminServer::serve(listener, state).map_err(AdminError::Serve)?;
        let started = AdminStarted {
            addr: server.local_addr(),
            listener: server.listener(),
        };
        tracing::info!(app = %self.lifecycle.name(), addr = %started.addr, "admin endpoint listening");
        self.lifecycle.close_in_step_6(move || server.stop());
        Ok(Some(started))
    }
}

/// The inherited admin socket if there is one, else a new one bound as `config` (from
/// `origin`) says. The token rule is checked either way.
fn admin_listener(config: &AdminConfig, origin: &str) -> Result<TcpListener, AdminError> {
    let configured = config
        .bind_addr()
        .map_err(|(key, message)| AdminError::Invalid { key, message })?;
    let Some(inherited) = InheritedListeners::global().take(ADMIN_LISTENER) else {
        return AdminServer::bind(config, origin);
    };
    if let Ok(addr) = inherited.local_addr()
        && addr != configured
        && configured.port() != 0
    {
        tracing::warn!(%configured, inherited = %addr, "admin endpoint: serving on the inherited socket, not on the configured address");
    }
    Ok(inherited)
}
