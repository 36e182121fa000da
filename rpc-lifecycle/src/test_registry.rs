//! The registry the lifecycle's tests register in: it records what it is asked, can
//! refuse registrations or withdrawals, and can hold withdrawals until a test lets them
//! through (or forever).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use rpc_core::{Instance, Registry, ServiceKey};
use rpc_core::{RegistryError, Subscription, SubscriptionId};

/// A registry that records what it is asked, can refuse registrations, and can hold
/// withdrawals until the test lets them through.
#[derive(Default)]
pub(super) struct TestRegistry {
    events: Mutex<Vec<String>>,
    /// Registrations fail while set.
    pub(super) refuse_register: AtomicBool,
    /// Withdrawals fail while set (a registry without a leader).
    pub(super) refuse_unregister: AtomicBool,
    /// Each withdrawal waits for a permit: none given, it never answers (a network
    /// partition).
    hold_unregister: Option<Arc<Semaphore>>,
}

impl TestRegistry {
    /// A registry whose withdrawals each wait for a permit of `gate`.
    pub(super) fn holding_withdrawals(gate: Arc<Semaphore>) -> Self {
        Self {
            hold_unregister: Some(gate),
            ..Self::default()
        }
    }

    /// What it was asked, in order: `register SERVICE`, `unregister SERVICE`.
    pub(super) fn events(&self) -> Vec<String> {
        self.events.lock().clone()
    }
}

#[async_trait]
impl Registry for TestRegistry {
    fn url(&self) -> &str {
        "recording://"
    }
    async fn register(&self, instance: &Instance) -> Result<(), RegistryError> {
        if self.refuse_register.load(Ordering::SeqCst) {
            return Err(RegistryError::Closed {
                url: self.url().into(),
            });
        }
        self.events
            .lock()
            .push(format!("register {}", instance.service));
        Ok(())
    }
    async fn unregister(&self, instance: &Instance) -> Result<(), RegistryError> {
        if let Some(gate) = &self.hold_unregister {
            let _ = gate.acquire().await.map(|permit| permit.forget());
        }
        if self.refuse_unregister.load(Ordering::SeqCst) {
            return Err(RegistryError::Closed {
                url: self.url().into(),
            });
        }
        self.events
            .lock()
            .push(format!("unregister {}", instance.service));
        Ok(())
    }
    async fn subscribe(&self, _: &ServiceKey) -> Result<Subscription, RegistryError> {
        Err(RegistryError::Closed {
            url: self.url().into(),
        })
    }
    async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), RegistryError> {
        Err(RegistryError::UnknownSubscription(id))
    }
    async fn close(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}
