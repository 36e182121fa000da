//! Moving a Nacos client to a new SDK connection when its server falls silent, and
//! retiring the connection it replaced (see "Several servers" in the module
//! documentation): the new connection writes every registration (and so owns the
//! instances), and the replaced one is kept and asked to withdraw what it held
//! (`retired.rs`), after which the instances still wanted are written again through the
//! new one.

use std::sync::Arc;

use nacos_sdk::api::naming::NamingService;
use tokio::time::Instant;

use crate::nacos::connection::ConnectionKeeper;
use crate::nacos::retired::{ASK_AFTER_CLOSE, RETRY_AFTER_CLOSE, Registrations};
use crate::nacos::{sdk, servers};

impl ConnectionKeeper {
    /// Replaces the SDK's connection `failed` (one that stopped answering) by a new one
    /// on the servers that accept a connection now, when some do not — nacos-sdk itself
    /// notices a silent server only after its health checks (5 s idle, then three tries
    /// of 3 s), about as late as a Nacos cluster drops the instances of a silent member's
    /// clients (15 s), so a provider whose member was partitioned lost its registration.
    /// The new connection writes every registration again (and so owns the instances:
    /// Nacos gives an address to the connection that wrote it last); the old one is kept
    /// until it has withdrawn them (`retired.rs`). One failover at a time: none while a
    /// replaced connection still holds instances. The new connection and its generation;
    /// `None` when there was nothing to leave (one server, every one accepting, or none),
    /// another failover is not done yet, or it failed.
    pub(super) async fn fail_over(
        self: &Arc<Self>,
        failed: &NamingService,
    ) -> Option<(u64, NamingService)> {
        let endpoints = &self.config.network.endpoints;
        if endpoints.len() < 2 || self.is_closing() || !self.retired.is_empty().await {
            return None;
        }
        let deadline = Instant::now() + self.config.network.connect_timeout;
        let servers = servers::for_the_sdk(&self.config).await;
        if servers.len() == endpoints.len() {
            return None;
        }
        let generation = self.naming.lock().as_ref()?.0 + 1;
        let cache = self
            .cache_dir
            .path()
            .join(format!("connection-{generation}"));
        let url = &self.lifetime.url;
        let started = match std::fs::create_dir_all(&cache) {
            Ok(()) => sdk::start(url, &self.config, &servers, &cache, deadline).await,
            Err(error) => Err(self.lifetime.failed("connect", error.to_string())),
        };
        let naming = match started {
            Ok(naming) => naming,
            Err(error) => {
                tracing::warn!(%url, %error, "Nacos failover: no new connection");
                return None;
            }
        };
        let registered = self.registered.lock().await;
        self.write_all(&naming, &registered).await;
        let replaced = {
            let mut current = self.naming.lock();
            let open = current.is_some() && !self.is_closing();
            if open {
                *current = Some((generation, naming.clone()));
            }
            open
        };
        if !replaced {
            // Closing began meanwhile: the new connection holds what it just wrote, and is
            // withdrawn as every replaced one is (the close asks it, in the background
            // if it must).
            self.retired.retire(naming, registered.clone()).await;
            self.withdraw_after_close(None);
            return None;
        }
        // The failed connection holds the redo tasks of the deregistrations owed too: it
        // is asked to send them, with the rest it holds.
        let mut holds = registered.clone();
        holds.extend(self.withdrawals.take().await);
        self.retired.retire(failed.clone(), holds).await;
        tracing::warn!(%url, ?servers, "Nacos server silent: this client moved to a new connection");
        Some((generation, naming))
    }

    /// Asks the connections a failover replaced to withdraw what they hold, then writes
    /// those instances this client still wants again through the current connection
    /// (see `retired.rs`; at close, only the first). Whether they hold nothing any more.
    pub(super) async fn withdraw_retired(&self) -> bool {
        let withdrawn = self
            .retired
            .withdraw(&self.group, self.request_timeout)
            .await;
        self.write_wanted(&withdrawn).await;
        self.retired.is_empty().await
    }

    /// After a close, goes on asking the connections a failover replaced to withdraw
    /// what they hold, and `naming` (the closed client's last connection, if given) to
    /// send the deregistrations still owed — their own retries would write those
    /// instances again — every [`RETRY_AFTER_CLOSE`] for at most [`ASK_AFTER_CLOSE`], in
    /// the background; logged when some is still held at the end.
    pub(super) fn withdraw_after_close(self: &Arc<Self>, naming: Option<NamingService>) {
        let keeper = self.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + ASK_AFTER_CLOSE;
            while Instant::now() < deadline {
                tokio::time::sleep(RETRY_AFTER_CLOSE).await;
                let retired = keeper.withdraw_retired().await;
                let owed = match &naming {
                    Some(naming) => {
                        let group = &keeper.group;
                        let bound = keeper.request_timeout;
                        keeper.withdrawals.send(naming, group, bound).await.1
                    }
                    None => 0,
                };
                if retired && owed == 0 {
                    return;
                }
            }
            tracing::warn!(url = %keeper.lifetime.url, "a closed Nacos client could not withdraw every instance: they stay listed until this process exits");
        });
    }

    /// Writes again through the current connection those of `keys` this client still
    /// wants (nothing once closing).
    async fn write_wanted(&self, keys: &[String]) {
        if keys.is_empty() {
            return;
        }
        let registered = self.registered.lock().await;
        let Ok(naming) = self.naming() else {
            return;
        };
        let wanted: Registrations = keys
            .iter()
            .filter_map(|key| Some((key.clone(), registered.get(key)?.clone())))
            .collect();
        self.write_all(&naming, &wanted).await;
    }
}
