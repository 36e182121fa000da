//! The admin endpoint: what an operator, a probe or a dashboard asks a running
//! instance, on its own HTTP listener (loopback port 22222 by default, like Dubbo's
//! QoS port).
//!
//! | request | answer |
//! |---|---|
//! | `GET /live` | 200 while the process answers (never tied to the registry) |
//! | `GET /startup` | 200 once start-up finished (references found, services bound, registered), else 503 |
//! | `GET /ready` | 200 while serving and online; 503 while a service is manually offline and from the first shutdown step on |
//! | `POST /offline[?service=REGEX]` | withdraws the registrations without stopping (closing mark, NOT_SERVING); JSON of what changed |
//! | `POST /online[?service=REGEX]` | registers them again; JSON of what changed |
//! | `POST /shutdown` | starts the graceful sequence (as SIGTERM does), answers 202 at once |
//! | `POST /upgrade` | runs a hot upgrade (as SIGUSR2 does) and answers once it is decided: its report as JSON, 200 succeeded, 409 refused, 500 failed |
//! | `GET /status` | the application as JSON: phase and history, registrations, references and their instances, in-flight counters, the shutdown's steps and last report, the browser rules' refusals |
//! | `GET /metrics` | Prometheus text ([`Metrics::encode`](crate::Metrics::encode)) |
//! | `GET /` | a status page that refreshes itself (no external assets) |
//!
//! Probes answer 200 or 503 with a one-line reason; every refusal is a 4xx with a
//! one-line reason (400 bad regex or no `Host`, 401 token, 403 what a web page sends,
//! 404 unknown path or service, 405 wrong method, 409 offline during start-up or
//! shutdown, 415 any body on an endpoint that changes state), never a panic and never a
//! change.
//! Nothing that changes state is reachable by GET; beyond loopback a token is required
//! and every state change must carry it (see [`AdminConfig`]).
//!
//! No web page can drive it (`browser/`): every endpoint but the probes refuses a
//! foreign `Origin` (403) and a `Host` that is not an IP address, `localhost` or a name
//! in `admin.allowed_hosts` (403, against DNS rebinding); a POST that changes state
//! from a browser must carry `X-Rpc-Admin` or the token (403), and none may carry a
//! body of a simple content type (415; nor may any request that changes state carry a
//! body at all: `no_body.rs`). `curl -X POST` sends no browser header and works
//! unchanged.
//!
//! It composes every part — lifecycle, cluster, configuration — so it lives in the
//! composition root, not in `lossless-rpc-core`. Its handlers are thin: they call the
//! lifecycle's and the cluster's public API and format the answer; manual offline,
//! the probes' verdicts and the instances' states are decided there
//! (`rpc-lifecycle/src/{traffic,probes}.rs`, `lossless-rpc-cluster`).
//!
//! Start-up binds it first, so `/live` and `/startup` answer while references are still
//! being resolved; shutdown closes it last, in step 6 after the drains, so probes answer
//! during the whole sequence. Binding and serving are separate ([`AdminServer::bind`],
//! [`AdminServer::serve`]): a hot upgrade hands the next process the bound listener.

mod answer;
mod auth;
mod browser;
mod config;
mod error;
mod handover;
mod metrics;
mod no_body;
mod no_parameters;
mod page;
mod probes;
mod routes;
mod shutdown;
mod state;
mod status;
mod traffic;
mod upgrade;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{AdminConfig, DEFAULT_ADMIN_PORT};
pub use error::AdminError;
pub use handover::AdminListener;
pub use state::AdminState;

/// How long stopping waits for answers being written before it closes their
/// connections: every admin answer is small and immediate.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// A running admin endpoint. Dropping it stops it too (without waiting).
#[derive(Debug)]
pub struct AdminServer {
    local_addr: SocketAddr,
    /// The listening socket while it serves, for a hot upgrade's hand-over.
    listener: AdminListener,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds the listener `config` asks for (`admin.host`, `admin.port`), after checking
    /// the token rule. `origin` is where the configuration came from
    /// ([`Config::origin`](crate::Config::origin)), which an error names.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] naming `admin.host` or `admin.token`;
    /// [`AdminError::PortInUse`] or [`AdminError::Bind`] naming `admin.port` and where to
    /// set it.
    pub fn bind(config: &AdminConfig, origin: &str) -> Result<std::net::TcpListener, AdminError> {
        let addr = config
            .bind_addr()
            .map_err(|(key, message)| AdminError::Invalid { key, message })?;
        let origin = origin.to_owned();
        std::net::TcpListener::bind(addr).map_err(|source| match source.kind() {
            ErrorKind::AddrInUse => AdminError::PortInUse { addr, origin },
            _ => AdminError::Bind {
                addr,
                source,
                origin,
            },
        })
    }

    /// Serves the admin endpoint of `state` on `listener`, already bound (by
    /// [`AdminServer::bind`], or inherited from the previous process by a hot upgrade).
    /// Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// The operating system's error if the listener cannot be handed to tokio.
    pub fn serve(listener: std::net::TcpListener, state: AdminState) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        let kept = AdminListener::serving(listener.try_clone()?);
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let local_addr = listener.local_addr()?;
        let (stop, mut stopped) = watch::channel(false);
        let server =
            axum::serve(listener, routes::router(state)).with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            });
        let task = tokio::spawn(async move {
            if let Err(error) = server.await {
                tracing::warn!(%error, "admin endpoint stopped on an error");
            }
        });
        Ok(Self {
            local_addr,
            listener: kept,
            stop,
            task: Some(task),
        })
    }

    /// Binds and serves: [`AdminServer::bind`] then [`AdminServer::serve`].
    ///
    /// # Errors
    /// As [`AdminServer::bind`]; [`AdminError::Serve`] if serving fails.
    pub fn start(
        config: &AdminConfig,
        origin: &str,
        state: AdminState,
    ) -> Result<Self, AdminError> {
        let listener = Self::bind(config, origin)?;
        Self::serve(listener, state).map_err(AdminError::Serve)
    }

    /// The address it listens on (the port chosen when `admin.port` is 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The listening socket, for a hot upgrade to hand over while this endpoint serves.
    pub fn listener(&self) -> AdminListener {
        self.listener.clone()
    }

    /// Stops: the listener closes at once, answers being written get `STOP_GRACE`
    /// (one second), then their connections are closed.
    pub async fn stop(mut self) {
        self.listener.close();
        self.stop.send_replace(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(STOP_GRACE, &mut task).await.is_err()
        {
            task.abort();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.listener.close();
        self.stop.send_replace(true);
    }
}
