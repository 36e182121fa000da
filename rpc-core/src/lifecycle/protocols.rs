//! What shutdown step 6 closes (and an abort, and a hot upgrade's old process after its
//! hand-over): listeners and connections, references, registries, and last what the
//! composition root handed over (the admin endpoint).

use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, join_all};

use super::Lifecycle;
use super::startup::ManagedReference;
use crate::registry::Registry;
use crate::transport::ServerHandle;

impl Lifecycle {
    /// Takes out what step 6 (or an abort, or the hot upgrade's drain) closes.
    pub(super) fn take_protocols(&self) -> Protocols {
        let mut parts = self.inner.parts.lock();
        Protocols {
            servers: std::mem::take(&mut parts.servers),
            references: std::mem::take(&mut parts.references),
            registries: std::mem::take(&mut parts.registries),
            closers: std::mem::take(&mut parts.closers),
        }
    }

    /// Hands step 6 something the composition root started beside this lifecycle's own
    /// listeners — the admin endpoint — to close last, after listeners, references and
    /// registries, so that it answers (probes, status) during the whole sequence. An
    /// [`abort`](Lifecycle::abort), including the one that undoes a failed start-up,
    /// closes it too. `close` runs at most once.
    pub fn close_in_step_6<F, Fut>(&self, close: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner
            .parts
            .lock()
            .closers
            .push(Box::new(move || close().boxed()));
    }
}

/// Something [`Lifecycle::close_in_step_6`] was handed.
pub(super) type Closer = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// What step 6 closes (and a hot upgrade's old process after its hand-over): listeners
/// and connections, references, registries, and last what the composition root handed
/// over (the admin endpoint).
pub(super) struct Protocols {
    pub(super) servers: Vec<ServerHandle>,
    references: Vec<Arc<dyn ManagedReference>>,
    registries: Vec<Arc<dyn Registry>>,
    closers: Vec<Closer>,
}

impl Protocols {
    /// Closes the references' channels and subscriptions, then the registries, then
    /// what the composition root handed over.
    pub(super) async fn release(self) {
        join_all(self.references.iter().map(|reference| reference.close())).await;
        join_all(
            self.registries
                .iter()
                .map(|registry| close_registry(registry.clone())),
        )
        .await;
        join_all(self.closers.into_iter().map(|close| close())).await;
    }
}

async fn close_registry(registry: Arc<dyn Registry>) {
    if let Err(error) = registry.close().await {
        tracing::warn!(registry = registry.url(), %error, "closing registry failed");
    }
}
