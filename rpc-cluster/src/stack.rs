//! What every call of one reference shares: its layers, from the strategy down to the
//! directory, and the channel's own accounts of what its calls did.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use crate::attempt_observer::AttemptObserver;
use crate::blacklist::Blacklist;
use crate::config::{BlacklistConfig, ReferenceConfig};
use crate::directory::Directory;
use crate::failback_queue::FailbackQueue;
use crate::loadbalance::LoadBalance;
use crate::retry_budget::RetryBudget;
use crate::rng::RngSource;
use crate::stats::ClusterStats;
use crate::strategy::{self, Strategy};

/// The layers and accounts of one reference, shared by every call through its
/// [`ClusterChannel`](crate::ClusterChannel) (and the channel's clones).
///
/// The layers, in the order a request meets them: the cluster `strategy`, the
/// `directory` of instances, the `blacklist` that keeps failing and closing ones out,
/// the `load_balance` that picks one. The accounts: the `retry_budget` (only for a
/// strategy that retries), the `stats`, the `failback` queue, the source of each call's
/// random numbers, and the observer told of each attempt, if any.
#[derive(Debug)]
pub(crate) struct ReferenceStack {
    pub(crate) strategy: Box<dyn Strategy>,
    pub(crate) directory: Arc<Directory>,
    pub(crate) blacklist: Blacklist,
    pub(crate) load_balance: Arc<dyn LoadBalance>,
    pub(crate) config: ReferenceConfig,
    /// The request header consistent hashing reads; `None` for other load balances, so
    /// their calls do not look it up.
    pub(crate) hash_header: Option<http::HeaderName>,
    pub(crate) retry_budget: Option<RetryBudget>,
    pub(crate) stats: ClusterStats,
    pub(crate) failback: FailbackQueue,
    pub(crate) rngs: RngSource,
    /// Set once, before calls are made (`ClusterChannel::with_attempt_observer`); unset,
    /// an attempt costs one atomic load for it.
    pub(crate) attempt_observer: OnceLock<Arc<dyn AttemptObserver>>,
    /// Whether attempts open spans (on unless tracing is turned off).
    pub(crate) attempt_spans: AtomicBool,
    /// The attribute names of attempt spans (set once, before calls are made; unset:
    /// the old names).
    pub(crate) span_conventions: OnceLock<rpc_core::RpcConventions>,
    /// The Triple headers of the reference's version and group, sent with every call
    /// (none for a service with neither): Dubbo providers route by them.
    pub(crate) service_headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl ReferenceStack {
    /// The stack of a reference with `config` over `directory`, ejecting by `blacklist`,
    /// picking by `load_balance`.
    pub(crate) fn new(
        directory: Arc<Directory>,
        config: ReferenceConfig,
        blacklist: BlacklistConfig,
        load_balance: Arc<dyn LoadBalance>,
    ) -> Self {
        let strategy = strategy::build(&config);
        let closing_expire = directory.config().closing_invoker_expire_time;
        Self {
            retry_budget: strategy
                .retries()
                .then(|| RetryBudget::new(&config.retry_budget)),
            strategy,
            blacklist: Blacklist::new(blacklist, closing_expire),
            hash_header: hash_header(&config, &*load_balance),
            load_balance,
            stats: ClusterStats::default(),
            failback: FailbackQueue::new(config.failback.clone()),
            rngs: RngSource::default(),
            attempt_observer: OnceLock::new(),
            attempt_spans: AtomicBool::new(true),
            span_conventions: OnceLock::new(),
            service_headers: rpc_core::triple::service_headers(directory.service()),
            directory,
            config,
        }
    }
}

/// The header the load balance reads, when it reads one (consistent hashing).
fn hash_header(
    config: &ReferenceConfig,
    load_balance: &dyn LoadBalance,
) -> Option<http::HeaderName> {
    if !load_balance.reads_hash_key() {
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
