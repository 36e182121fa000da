//! The fleet's registry as one consumer sees it: the plan's pushes, each arriving the
//! consumer's own watch delay after the registry sent it. A subscriber gets the latest
//! list at once, then every later push — never each change on its own, which is what
//! makes a roll of 10 000 instances cost a consumer tens of events instead of 20 000.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::stream;
use rpc::core::{
    Instance, Registry, RegistryError, ServiceKey, Snapshot, SnapshotOrigin, Subscription,
    SubscriptionId,
};
use tokio::time::Instant;

use super::plan::RollPlan;

/// One consumer's client of the fleet's registry.
pub struct PushClient {
    plan: Arc<RollPlan>,
    /// The consumer's time zero.
    origin: Instant,
    /// How late each push reaches this consumer.
    delay: Duration,
    /// Pushes delivered after the first list, counted for the registry's figures.
    deliveries: Arc<AtomicU64>,
}

impl PushClient {
    /// The client of a consumer whose time zero is `origin`, which receives each push
    /// `delay` after the registry sends it and counts them in `deliveries`.
    pub fn new(
        plan: Arc<RollPlan>,
        origin: Instant,
        delay: Duration,
        deliveries: Arc<AtomicU64>,
    ) -> Self {
        Self {
            plan,
            origin,
            delay,
            deliveries,
        }
    }
}

#[async_trait::async_trait]
impl Registry for PushClient {
    fn url(&self) -> &str {
        "sim://fleet-registry"
    }

    async fn register(&self, _instance: &Instance) -> Result<(), RegistryError> {
        Err(RegistryError::Operation {
            url: self.url().to_owned(),
            operation: "register",
            source: "the fleet's consumers export nothing".into(),
        })
    }

    async fn unregister(&self, _instance: &Instance) -> Result<(), RegistryError> {
        Ok(())
    }

    async fn subscribe(&self, service: &ServiceKey) -> Result<Subscription, RegistryError> {
        let plan = self.plan.clone();
        let (origin, delay) = (self.origin, self.delay);
        let deliveries = self.deliveries.clone();
        let wanted = *service == plan.service;
        let elapsed = origin.elapsed();
        // The latest push this consumer has received by now, then each later one.
        let first = plan
            .pushes
            .iter()
            .rposition(|push| push.at + delay <= elapsed)
            .unwrap_or(0);
        let service = service.clone();
        let pushes = stream::unfold(first, move |next| {
            let (plan, service, deliveries) = (plan.clone(), service.clone(), deliveries.clone());
            async move {
                let push = plan.pushes.get(next)?;
                if next != first {
                    tokio::time::sleep_until(origin + push.at + delay).await;
                    deliveries.fetch_add(1, Ordering::Relaxed);
                }
                let instances = if wanted {
                    push.instances.clone()
                } else {
                    Arc::from([])
                };
                let snapshot = Snapshot {
                    service,
                    revision: push.revision,
                    instances,
                    origin: SnapshotOrigin::Authoritative,
                };
                Some((snapshot, next + 1))
            }
        });
        // After the last push the watch stays open, as a real one does.
        let open = stream::pending();
        Ok(Subscription::new(
            SubscriptionId::next(),
            futures_util::StreamExt::chain(pushes, open),
        ))
    }

    async fn unsubscribe(&self, _id: SubscriptionId) -> Result<(), RegistryError> {
        Ok(())
    }

    async fn close(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;
    use crate::fleet::FleetSpec;

    #[tokio::test(start_paused = true)]
    async fn a_subscriber_gets_the_latest_list_then_each_push_its_delay_late() {
        let spec = FleetSpec {
            instances: 100,
            consumers: 1,
            batch: 50,
            ..FleetSpec::full()
        };
        let plan = Arc::new(RollPlan::draw(&spec));
        let origin = Instant::now();
        let delay = Duration::from_millis(150);
        let deliveries = Arc::new(AtomicU64::new(0));
        let client = PushClient::new(plan.clone(), origin, delay, deliveries.clone());
        // Subscribing after the second push was sent and received: that one comes first.
        let second = plan.pushes[2].at + delay;
        tokio::time::sleep_until(origin + second).await;
        let mut subscription = client.subscribe(&plan.service).await.unwrap();
        let first = subscription.next().await.unwrap();
        assert_eq!(first.revision, plan.pushes[2].revision);
        assert_eq!(deliveries.load(Ordering::Relaxed), 0);
        let next = subscription.next().await.unwrap();
        assert_eq!(next.revision, plan.pushes[3].revision);
        // tokio's timer counts whole milliseconds.
        let due = plan.pushes[3].at + delay;
        assert!(origin.elapsed() >= due && origin.elapsed() < due + Duration::from_millis(1));
        assert_eq!(deliveries.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn another_service_is_listed_empty() {
        let plan = Arc::new(RollPlan::draw(&FleetSpec {
            instances: 10,
            batch: 5,
            ..FleetSpec::full()
        }));
        let client = PushClient::new(plan, Instant::now(), Duration::ZERO, Arc::default());
        let mut subscription = client
            .subscribe(&ServiceKey::new("other.Service"))
            .await
            .unwrap();
        assert!(subscription.next().await.unwrap().instances.is_empty());
    }
}
