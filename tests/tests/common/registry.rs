//! Registry servers of a test on this machine's loopback, and a subscription's next
//! snapshot.

use std::time::Duration;

use futures_util::StreamExt;
use rpc_core::{Instance, Subscription};
use rpc_testkit::registry_server::{Backend, RegistryServer};

/// A registry server of `backend` on loopback, or `None` after one `SKIPPED` line when
/// it cannot run here — a failure when `RPC_TEST_REQUIRE_REGISTRIES` is set, as in CI.
pub async fn registry(test: &str, backend: Backend) -> Option<RegistryServer> {
    or_skip(test, RegistryServer::start(backend).await)
}

/// What was `started`, or `None` after one `SKIPPED` line naming `test` (a failure when
/// `RPC_TEST_REQUIRE_REGISTRIES` is set).
pub fn or_skip<T>(test: &str, started: std::io::Result<T>) -> Option<T> {
    match started {
        Ok(started) => Some(started),
        Err(error) => {
            assert!(
                std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
                "{test}: {error} (RPC_TEST_REQUIRE_REGISTRIES is set)"
            );
            println!("SKIPPED {test}: {error}");
            None
        }
    }
}

/// The next snapshot of `watch`, within `within`; panics when none comes or the watch
/// ended.
pub async fn next_snapshot(watch: &mut Subscription, within: Duration) -> Vec<Instance> {
    let snapshot = tokio::time::timeout(within, watch.next())
        .await
        .expect("a snapshot in time")
        .expect("the watch goes on");
    snapshot.instances.to_vec()
}
