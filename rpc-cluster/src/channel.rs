//! `ClusterChannel`: the whole consumer stack as one tonic `GrpcService`.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::{Request, Response};
use rpc_core::BoxError;
use rpc_core::metadata::NO_TIME_LEFT;
use tonic::Status;
use tonic::body::Body as TonicBody;
use tower_service::Service;

use crate::attempt_observer::AttemptObserver;
use crate::call::{self, Call};
use crate::call_deadline;
use crate::config::{BlacklistConfig, ReferenceConfig};
use crate::directory::Directory;
use crate::loadbalance::{LoadBalance, LoadBalances, P2c};
use crate::stack::ReferenceStack;
use crate::stats::ClusterCounts;

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
    stack: Arc<ReferenceStack>,
}

impl ClusterChannel {
    /// A channel over `directory` with the reference's `config` (strategy, load
    /// balance, timeouts, retry budget, failback, ...) and the `blacklist` policy. The
    /// load balance is the built-in one `config.loadbalance` names; a custom name needs
    /// [`ClusterChannel::with_load_balance`] (here it is replaced by P2C, logged as an
    /// error: a constructor without a `Result` must give a working channel). An
    /// application never reaches that fallback: its start checks every reference's
    /// name against the load balances it registered and fails with a configuration
    /// error naming the key; only code that builds a channel itself can.
    pub fn new(
        directory: Arc<Directory>,
        config: ReferenceConfig,
        blacklist: BlacklistConfig,
    ) -> Self {
        let load_balance = LoadBalances::default()
            .build(&config.loadbalance)
            .unwrap_or_else(|unknown| {
                tracing::error!(service = %directory.service(), %unknown, "load balance not built in; using p2c");
                Arc::new(P2c)
            });
        Self::with_load_balance(directory, config, blacklist, load_balance)
    }

    /// As [`ClusterChannel::new`], with `load_balance` picking the instances (e.g. one
    /// a [`LoadBalances`] built from `config.loadbalance`, the application's own
    /// included).
    pub fn with_load_balance(
        directory: Arc<Directory>,
        config: ReferenceConfig,
        blacklist: BlacklistConfig,
        load_balance: Arc<dyn LoadBalance>,
    ) -> Self {
        let stack = ReferenceStack::new(directory, config, blacklist, load_balance);
        Self {
            stack: Arc::new(stack),
        }
    }

    /// This channel with every random choice of its calls drawn from `seed`: the load
    /// balance's picks, failover's backoff and the blacklist's ejection jitter (for
    /// tests). Calls made in the same order then make the same choices. Clones share
    /// the seed; calls made before keep the choices they drew.
    pub fn with_seed(self, seed: u64) -> Self {
        self.stack.rngs.set_seed(seed);
        self
    }

    /// This channel with `observer` told of every attempt of its calls (e.g. a histogram
    /// of attempt durations). Clones share it. Set it once, before calls are made: a
    /// second observer is ignored (with a warning).
    pub fn with_attempt_observer(self, observer: Arc<dyn AttemptObserver>) -> Self {
        if self.stack.attempt_observer.set(observer).is_err() {
            tracing::warn!(service = %self.stack.directory.service(), "an attempt observer was already set; the new one is ignored");
        }
        self
    }

    /// This channel with (`true`, the default) or without a `tracing` span per attempt
    /// (see `call/telemetry.rs`). Clones share the setting.
    pub fn with_attempt_spans(self, on: bool) -> Self {
        self.stack
            .attempt_spans
            .store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// This channel with its attempt spans' attribute names as `conventions` chooses
    /// (default [`RpcConventions::Old`](rpc_core::RpcConventions::Old)); the first
    /// setting holds, as clones share it.
    pub fn with_span_conventions(self, conventions: rpc_core::RpcConventions) -> Self {
        // A second setting is ignored: the first was made before any call.
        let _ = self.stack.span_conventions.set(conventions);
        self
    }

    /// The directory of instances this channel picks from.
    pub fn directory(&self) -> &Arc<Directory> {
        &self.stack.directory
    }

    /// The reference's settings.
    pub fn config(&self) -> &ReferenceConfig {
        &self.stack.config
    }

    /// What this reference did so far (calls, retries, re-routes, ejections, ...).
    pub fn stats(&self) -> ClusterCounts {
        self.stack
            .stats
            .counts(self.stack.blacklist.stats().counts())
    }

    /// Calls waiting for a failback retry.
    pub fn failback_queued(&self) -> usize {
        self.stack.failback.len()
    }

    /// Stops background work (failback retries) and closes every channel.
    pub fn close(&self) {
        self.stack.failback.close();
        self.stack.directory.destroy_all();
    }

    #[cfg(test)]
    pub(crate) fn stack(&self) -> &Arc<ReferenceStack> {
        &self.stack
    }
}

impl std::fmt::Debug for ClusterChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterChannel")
            .field("service", self.stack.directory.service())
            .field("cluster", &self.stack.config.cluster)
            .field("loadbalance", &self.stack.config.loadbalance)
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
        self.stack.stats.note_call();
        let call = Call::new(self.stack.clone(), request);
        // The caller's deadline bounds the whole call, streams included (call_deadline.rs).
        let deadline = call.caller_deadline();
        match deadline {
            // Nothing sent could come back in time (a handler whose caller has given up).
            Some(limit) if limit.is_zero() => Box::pin(std::future::ready(Err(Box::new(
                Status::deadline_exceeded(NO_TIME_LEFT),
            )
                as BoxError))),
            Some(limit) => call_deadline::bound(call::run(call), limit),
            None => call::run(call),
        }
    }
}
