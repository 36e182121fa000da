//! What the admin handlers read: the application's lifecycle, references and metrics,
//! the token that guards state changes, and what the browser rules (`browser/`) need. Handles, not the world: a handler can ask and
//! format, and change only what the lifecycle's public API lets it.

use std::sync::Arc;

use rpc_cluster::ClusterChannel;
use rpc_lifecycle::Lifecycle;

use super::browser::{AllowedHosts, Refusals};
use super::error::AdminError;
use crate::Metrics;

/// The state every admin handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AdminState {
    pub(crate) lifecycle: Lifecycle,
    pub(crate) references: Arc<[ClusterChannel]>,
    pub(crate) metrics: Metrics,
    pub(crate) token: Option<Arc<str>>,
    /// The names `Host` may give besides IP addresses and `localhost`.
    pub(crate) allowed_hosts: AllowedHosts,
    /// What the browser rules refused, for `GET /status`.
    pub(crate) refusals: Refusals,
}

impl AdminState {
    /// The admin view of an application: its `lifecycle`, the cluster channels of its
    /// `references` (for their instances), its `metrics`, and the `token` state changes
    /// must carry (`None`: none needed; allowed on loopback only, see
    /// [`AdminConfig::bind_addr`](super::AdminConfig::bind_addr)).
    pub fn new(
        lifecycle: Lifecycle,
        references: Vec<ClusterChannel>,
        metrics: Metrics,
        token: Option<&str>,
    ) -> Self {
        Self {
            lifecycle,
            references: references.into(),
            metrics,
            token: token.map(Arc::from),
            allowed_hosts: AllowedHosts::default(),
            refusals: Refusals::default(),
        }
    }

    /// Also answers requests whose `Host` is one of `names` (`admin.allowed_hosts`:
    /// `greeter.internal` for any port, `greeter.internal:22222` for that one), besides
    /// IP addresses and `localhost`, which it always answers. Any other `Host` is refused
    /// with 403, against DNS rebinding.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] naming `admin.allowed_hosts` when an entry is not a host
    /// name with an optional port (empty, a URL).
    pub fn with_allowed_hosts(mut self, names: &[String]) -> Result<Self, AdminError> {
        self.allowed_hosts = AllowedHosts::parse(names).map_err(|message| AdminError::Invalid {
            key: "admin.allowed_hosts",
            message,
        })?;
        Ok(self)
    }
}
