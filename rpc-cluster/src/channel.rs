//! `ClusterChannel`: the whole consumer stack as one tonic `GrpcService`.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::{Request, Response};
use parking_lot::Mutex;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;
use tower_service::Service;

use crate::blacklist::Blacklist;
use crate::call::CallContext;
use crate::config::{BlacklistConfig, ReferenceConfig};
use crate::directory::Directory;
use crate::loadbalance::{self, LoadBalance};
use crate::retry_budget::RetryBudget;
use crate::stats::{ClusterCounts, ClusterStats};
use crate::strategy::{self, FailbackQueue};

/// The consumer side of one reference: cluster strategy → directory → blacklist →
/// load balance → one lazily-connected channel per instance.
///
/// It implements `tower::Service<http::Request<tonic::body::Body>>`, hence tonic's
/// `GrpcService`, so a generated client works on it unchanged:
/// `GreeterClient::new(channel)`. Cheap to clone; clones share everything.
///
/// Errors reach the caller as a `tonic::Status`: `UNAVAILABLE` with a
/// [`ClusterError`](crate::ClusterError) source when no provider is available,
/// `DEADLINE_EXCEEDED` when an attempt timed out, or the provider's own status.
#[derive(Clone)]
pub struct ClusterChannel {
    inner: Arc<ClusterInner>,
}

pub(crate) struct ClusterInner {
    pub(crate) directory: Arc<Directory>,
    pub(crate) lb: Arc<dyn LoadBalance>,
    pub(crate) blacklist: Blacklist,
    pub(crate) config: ReferenceConfig,
    pub(crate) budget: RetryBudget,
    pub(crate) failback: FailbackQueue,
    pub(crate) stats: ClusterStats,
    /// The request header consistent hashing reads; `None` for other load balances, so
    /// their calls do not look it up.
    pub(crate) hash_header: Option<http::HeaderName>,
    seeded: Option<Mutex<fastrand::Rng>>,
}

impl ClusterInner {
    /// The RNG for one call: a fresh generator seeded from the thread-local one, or,
    /// in tests, one derived from the fixed seed.
    pub(crate) fn rng(&self) -> fastrand::Rng {
        match &self.seeded {
            Some(seeded) => fastrand::Rng::with_seed(seeded.lock().u64(..)),
            None => fastrand::Rng::new(),
        }
    }
}

impl ClusterChannel {
    /// A channel over `directory` with the reference's `config` and the `blacklist`
    /// policy.
    pub fn new(
        directory: Arc<Directory>,
        config: ReferenceConfig,
        blacklist: BlacklistConfig,
    ) -> Self {
        let closing_expire = directory.config().closing_invoker_expire_time;
        Self {
            inner: Arc::new(ClusterInner {
                lb: loadbalance::build(config.loadbalance),
                blacklist: Blacklist::new(blacklist, closing_expire),
                budget: RetryBudget::new(&config.retry_budget),
                failback: FailbackQueue::default(),
                stats: ClusterStats::default(),
                hash_header: hash_header(&config),
                seeded: None,
                directory,
                config,
            }),
        }
    }

    /// This channel with every random choice drawn from `seed` (for tests).
    ///
    /// # Panics
    /// If the channel was already cloned (call it right after [`ClusterChannel::new`]).
    pub fn with_seed(self, seed: u64) -> Self {
        let inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("with_seed must be called before cloning"));
        Self {
            inner: Arc::new(ClusterInner {
                seeded: Some(Mutex::new(fastrand::Rng::with_seed(seed))),
                ..inner
            }),
        }
    }

    /// The directory of instances this channel picks from.
    pub fn directory(&self) -> &Arc<Directory> {
        &self.inner.directory
    }

    /// The reference's settings.
    pub fn config(&self) -> &ReferenceConfig {
        &self.inner.config
    }

    /// What this reference did so far (calls, retries, re-routes, ejections, ...).
    pub fn stats(&self) -> ClusterCounts {
        self.inner
            .stats
            .counts(self.inner.blacklist.stats().counts())
    }

    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Arc<ClusterInner> {
        &self.inner
    }

    /// Calls waiting for a failback retry.
    pub fn failback_queued(&self) -> usize {
        self.inner.failback.len()
    }

    /// Stops background work (failback retries) and closes every channel.
    pub fn close(&self) {
        self.inner.failback.close();
        self.inner.directory.destroy_all();
    }
}

fn hash_header(config: &ReferenceConfig) -> Option<http::HeaderName> {
    if config.loadbalance != crate::LoadBalanceKind::ConsistentHash {
        return None;
    }
    match http::HeaderName::try_from(config.hash_key.as_str()) {
        Ok(name) => Some(name),
        Err(_) => {
            tracing::warn!(hash_key = %config.hash_key, "hash_key is not a valid header name; requests are spread at random");
            None
        }
    }
}

impl std::fmt::Debug for ClusterChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterChannel")
            .field("service", self.inner.directory.service())
            .field("cluster", &self.inner.config.cluster)
            .field("loadbalance", &self.inner.config.loadbalance)
            .finish()
    }
}

impl Service<Request<TonicBody>> for ClusterChannel {
    type Response = Response<TonicBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<TonicBody>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Readiness is per instance and decided at pick time; the channel itself is
        // always ready (tonic's balance channel behaves the same way).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<TonicBody>) -> Self::Future {
        let inner = self.inner.clone();
        inner.stats.note_call();
        let kind = inner.config.cluster;
        strategy::run(kind, CallContext::new(inner, request))
    }
}
