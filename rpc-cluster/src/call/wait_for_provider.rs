//! gRPC's wait-for-ready, for a call that finds no instance to send to.
//!
//! The service's only instance between its stop and its start, a service scaled up
//! from zero, or the only instance refusing as it closes (its refusal is "not
//! executed", so the request may go anywhere): failing such a call at once with "no
//! provider" loses a call that an instance listed a moment later would have served.
//! The call waits for the directory's list to change and picks again, up to the
//! reference's `wait_for_provider`, never past the attempt's `timeout`; the caller's
//! deadline bounds the whole call above this (`call_deadline.rs`). Nothing was sent
//! while it waits, so waiting is safe for every method, idempotent or not.

use std::sync::Arc;

use tokio::time::Instant;

use super::Call;
use super::pick::Route;
use crate::invoker::Invoker;

impl Call {
    /// Waits for the directory to list an instance this call can pick by `route`, and
    /// picks it. `None` when the bound passes first, or is zero (no waiting), or when an
    /// attempt of this call was already answered: a call whose instances were all tried
    /// and failed gets that failure at once, as before — only a call that nothing has
    /// served yet (none sent, or only refusals of what was not executed) waits.
    pub(super) async fn wait_for_provider(&mut self, route: Route) -> Option<Arc<Invoker>> {
        let configured = self.stack.config.wait_for_provider;
        let bound = self
            .attempt_timeout()
            .map_or(configured, |timeout| timeout.min(configured));
        if bound.is_zero() || self.attempts > 0 {
            return None;
        }
        self.stack.stats.note_waited_for_provider();
        let deadline = Instant::now() + bound;
        // Subscribed before the pick below, so a change between the caller's failed pick
        // and this wait is not missed.
        let mut changes = self.stack.directory.known_changes();
        loop {
            if let Some(invoker) = self.pick(route) {
                return Some(invoker);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The bound passed, or the directory is gone (the reference was dropped).
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rpc_core::{ServiceKey, Snapshot};

    use super::*;
    use crate::call::testing::{call, channel, instance};
    use crate::config::{BlacklistConfig, ReferenceConfig};

    fn reference(wait: Duration, timeout: Option<Duration>) -> ReferenceConfig {
        ReferenceConfig {
            wait_for_provider: wait,
            timeout,
            ..ReferenceConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_with_no_instance_picks_the_first_one_listed_while_it_waits() {
        let channel = channel(
            &[],
            reference(Duration::from_secs(3), None),
            BlacklistConfig::default(),
            1,
        );
        let directory = channel.stack().directory.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            directory.apply(Snapshot::new(ServiceKey::new("t.S"), 2, vec![instance(7)]));
        });
        let mut call = call(&channel);
        let picked = call
            .wait_for_provider(Route::Balanced)
            .await
            .expect("listed in time");
        assert_eq!(picked.id().as_str(), "i7");
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "woken by the change, not a poll"
        );
        assert_eq!(
            channel
                .stack()
                .stats
                .counts(Default::default())
                .waited_for_provider,
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_at_its_bound_or_the_attempt_timeout_whichever_is_first() {
        for (wait, timeout, waited) in [
            (Duration::from_secs(3), None, Duration::from_secs(3)),
            (
                Duration::from_secs(3),
                Some(Duration::from_millis(500)),
                Duration::from_millis(500),
            ),
        ] {
            let channel = channel(&[], reference(wait, timeout), BlacklistConfig::default(), 1);
            let started = Instant::now();
            assert!(
                call(&channel)
                    .wait_for_provider(Route::Balanced)
                    .await
                    .is_none()
            );
            assert_eq!(
                started.elapsed(),
                waited,
                "wait {wait:?}, timeout {timeout:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_whose_attempt_was_answered_does_not_wait() {
        let channel = channel(
            &[5],
            reference(Duration::from_secs(3), None),
            BlacklistConfig::default(),
            1,
        );
        let mut failed = call(&channel);
        failed.tried.push(instance(5).id);
        failed.attempts = 1;
        let started = Instant::now();
        assert!(failed.wait_for_provider(Route::Balanced).await.is_none());
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_bound_fails_at_once_and_an_unrelated_change_does_not_end_the_wait() {
        let none = channel(
            &[],
            reference(Duration::ZERO, None),
            BlacklistConfig::default(),
            1,
        );
        let started = Instant::now();
        assert!(
            call(&none)
                .wait_for_provider(Route::Balanced)
                .await
                .is_none()
        );
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(
            none.stack()
                .stats
                .counts(Default::default())
                .waited_for_provider,
            0
        );

        // The only instance already tried (it refused as it closed): a snapshot that
        // changes only its weight wakes the wait, which picks nothing and waits on until
        // a new instance is listed.
        let only = channel(
            &[5],
            reference(Duration::from_secs(2), None),
            BlacklistConfig::default(),
            1,
        );
        let mut refused = call(&only);
        refused.tried.push(instance(5).id);
        let directory = only.stack().directory.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut reweighted = instance(5);
            reweighted.weight += 1;
            let applied = directory.apply(Snapshot::new(
                ServiceKey::new("t.S"),
                2,
                vec![reweighted.clone()],
            ));
            assert!(
                matches!(applied, crate::directory::Applied::Changed { .. }),
                "{applied:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
            directory.apply(Snapshot::new(
                ServiceKey::new("t.S"),
                3,
                vec![reweighted, instance(6)],
            ));
        });
        let started = Instant::now();
        let picked = refused
            .wait_for_provider(Route::Balanced)
            .await
            .expect("the new one");
        assert_eq!(picked.id().as_str(), "i6");
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(200),
            "not ended by the reweighting"
        );
    }
}
