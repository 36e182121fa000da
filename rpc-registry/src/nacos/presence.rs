//! The probe of a Nacos client's connection (see "Presence" in the module
//! documentation).
//!
//! The server drops a connection's instances when the connection closes or stops
//! answering its health checks, and the SDK registers everything again after a
//! reconnection; but it notices a broken connection only when a request needs it, and
//! re-registers on a 3 s tick. So while this client has registrations or subscriptions, a
//! probe (one small request every [`PROBE_INTERVAL`]) keeps the SDK trying; when a probe
//! succeeds after a failure (or after waiting longer than the interval: it waited for a
//! reconnection), every registration is written again and every subscription is told to
//! read again at once. When a probe fails and some of the URL's servers no longer accept
//! a connection, the SDK's connection is replaced by one on the others
//! ([`ConnectionKeeper::fail_over`]), and every subscription reads (and listens) again
//! through it. After every probe that answered, the deregistrations still owed are sent
//! again (`withdrawals.rs`).

use std::sync::Weak;
use std::time::Duration;

use nacos_sdk::api::naming::NamingService;

use crate::nacos::connection::ConnectionKeeper;
use crate::remote::retry::bounded;

/// How often a client with registrations or subscriptions checks its connection.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The probe task. Holds the keeper weakly so that dropping the client ends it.
pub(super) async fn probe(keeper: Weak<ConnectionKeeper>, mut naming: NamingService) {
    let Some(cancel) = keeper.upgrade().map(|keeper| keeper.closed()) else {
        return;
    };
    let mut failing = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(PROBE_INTERVAL) => {}
        }
        let Some(keeper) = keeper.upgrade() else {
            return;
        };
        keeper.withdraw_retired().await;
        if !keeper.is_busy().await {
            continue;
        }
        let probe = naming.get_service_list(1, 1, Some(keeper.group().to_owned()));
        let started = tokio::time::Instant::now();
        let answered = tokio::select! {
            () = cancel.cancelled() => return,
            answered = bounded(keeper.request_timeout(), probe) => answered.is_ok(),
        };
        // A probe that waited for the SDK to reconnect answers late, not with an error.
        let reconnected = failing || started.elapsed() > PROBE_INTERVAL;
        if answered && reconnected {
            tracing::info!(url = %keeper.url(), "Nacos answers again; registering and reading again");
            keeper.register_again(&naming).await;
            keeper.set_reregistering(false);
            keeper.resync_subscriptions();
        }
        if answered {
            keeper.send_withdrawals().await;
        } else {
            // The server drops a silent connection's instances: they are to be written
            // again once it answers.
            if keeper.has_registrations().await {
                keeper.set_reregistering(true);
            }
            if let Some((_, replaced)) = keeper.fail_over(&naming).await {
                // The new connection wrote every registration.
                naming = replaced;
                keeper.set_reregistering(false);
                keeper.resync_subscriptions();
                failing = false;
                continue;
            }
            if !failing {
                tracing::warn!(url = %keeper.url(), "Nacos does not answer; keeping the last known instances");
            }
        }
        failing = !answered;
    }
}
