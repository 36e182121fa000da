//! What the admin handlers read: the application's lifecycle, references and metrics,
//! and the token that guards state changes. Handles, not the world: a handler can ask and
//! format, and change only what the lifecycle's public API lets it.

use std::sync::Arc;

use rpc_cluster::ClusterChannel;
use rpc_lifecycle::Lifecycle;

use crate::Metrics;

/// The state every admin handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AdminState {
    pub(crate) lifecycle: Lifecycle,
    pub(crate) references: Arc<[ClusterChannel]>,
    pub(crate) metrics: Metrics,
    pub(crate) token: Option<Arc<str>>,
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
        }
    }
}
