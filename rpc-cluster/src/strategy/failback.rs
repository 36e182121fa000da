//! Failback: swallow the failure now, retry it later in the background.

use std::sync::Arc;
use std::time::Duration;

use http::Response;
use rpc_core::BoxError;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tonic::body::Body as TonicBody;

use super::empty_response;
use crate::call::CallContext;
use crate::classify::Outcome;

/// Requests waiting for a background retry, at most. Dubbo keeps a similar bound.
pub(crate) const QUEUE_CAPACITY: usize = 1024;
/// Pause before each background retry (Dubbo's failback period).
pub(crate) const RETRY_PERIOD: Duration = Duration::from_secs(5);
/// Background retries per request before it is dropped (Dubbo's default).
pub(crate) const MAX_RETRIES: u32 = 3;

/// Failback: one attempt; on failure the caller gets an empty response at once and the
/// request is queued (at most 1024 at once: beyond that the new one is dropped and
/// logged) and retried every 5 s, up to 3 times, in the background — for
/// notifications that must eventually arrive but need not hold up the caller. A request
/// whose body cannot be replayed is not queued.
pub(crate) async fn run(mut call: CallContext) -> Result<Response<TonicBody>, BoxError> {
    match call.send().await {
        Some(Outcome::Success(response) | Outcome::AppError(response)) => return Ok(response),
        Some(Outcome::Failure(failure)) => {
            tracing::warn!(service = %call.cluster.directory.service(), kind = ?failure.kind, "failback: call failed; will retry in the background");
        }
        None => {
            tracing::warn!(service = %call.cluster.directory.service(), "failback: no provider; will retry in the background")
        }
    }
    call.cluster.stats.note_swallowed();
    if call.body.replayable() {
        let cluster = call.cluster.clone();
        cluster.failback.enqueue(call);
    }
    Ok(empty_response())
}

/// The failed calls waiting for a background retry, at most [`QUEUE_CAPACITY`].
#[derive(Debug)]
pub(crate) struct FailbackQueue {
    slots: Arc<Semaphore>,
    closed: CancellationToken,
}

impl Default for FailbackQueue {
    fn default() -> Self {
        Self {
            slots: Arc::new(Semaphore::new(QUEUE_CAPACITY)),
            closed: CancellationToken::new(),
        }
    }
}

impl FailbackQueue {
    /// Calls waiting for a retry.
    pub(crate) fn len(&self) -> usize {
        QUEUE_CAPACITY - self.slots.available_permits()
    }

    fn enqueue(&self, call: CallContext) {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            tracing::error!("failback queue full ({QUEUE_CAPACITY} calls); request dropped");
            return;
        };
        let closed = self.closed.clone();
        tokio::spawn(async move {
            let _slot = slot;
            tokio::select! {
                _ = closed.cancelled() => {}
                _ = retry(call) => {}
            }
        });
    }

    /// Drops every queued call (shutdown).
    pub(crate) fn close(&self) {
        self.closed.cancel();
    }
}

async fn retry(mut call: CallContext) {
    for round in 1..=MAX_RETRIES {
        tokio::time::sleep(RETRY_PERIOD).await;
        call.tried.clear();
        match call.send().await {
            Some(Outcome::Success(_) | Outcome::AppError(_)) => {
                tracing::info!(round, "failback: background retry succeeded");
                return;
            }
            _ if !call.body.replayable() => break,
            _ => {}
        }
    }
    tracing::error!("failback: request dropped after {MAX_RETRIES} background retries");
}
