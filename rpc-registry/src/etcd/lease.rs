//! The keeper of an etcd client's liveness: the one lease every key of this client hangs
//! on, and the registrations written under it.
//!
//! The first registration grants the lease; a background task keeps it alive (a keep-alive
//! every third of the TTL). When the lease is lost anyway (etcd unreachable for longer than
//! the TTL, or restarted without its data, or this process paused past it) the task grants
//! a new one as soon as etcd answers again and writes every registration under it —
//! retried with a capped backoff until it holds. Registrations and the lease sit behind
//! one lock, so a renewal and a registration never interleave: every key recorded is under
//! the lease recorded. Closing revokes the lease, which deletes every key of this client
//! at once.
//!
//! # Ownership
//! A key belongs to the lease it hangs on. `register` takes a key whoever holds it (a put
//! moves it to this client's lease: how a hot upgrade's new generation takes over), but
//! nothing else this client does touches a key another lease holds: a renewal writes a
//! key only where it is absent or still on the lease it was written under, and
//! `unregister` deletes it only while it hangs on this client's lease, each in one etcd
//! transaction (`txn.rs`). A key found on another lease is left to it and forgotten here
//! (logged once), so this client neither writes it again nor deletes it later.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rpc_core::RegistryError;
use tokio::sync::{Mutex, MutexGuard, watch};

use crate::etcd::client::EtcdClient;
use crate::etcd::error::{EtcdError, call, is_lease_gone};
use crate::etcd::keep_alive::{KeepAliveEnd, keep_alive};
use crate::etcd::txn::Held;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure};

/// The lease of one etcd client and the registrations written under it.
pub(super) struct LeaseKeeper {
    /// Its client's URL (for logs and errors), closed token and task tracker.
    lifetime: Arc<ClientLifetime>,
    etcd: EtcdClient,
    /// Lease time-to-live.
    ttl: Duration,
    /// Bound on each request, and on waiting for a renewal in progress.
    request_timeout: Duration,
    /// Registrations and the lease they hang on; one lock so that a lease renewal and a
    /// registration never interleave.
    leased: Mutex<Leased>,
    /// The current lease, for the keep-alive task.
    lease_tx: watch::Sender<Option<i64>>,
    /// Set from the moment the lease is found lost until every registration is written
    /// under a new one.
    restoring: AtomicBool,
}

/// The lease and what hangs on it.
#[derive(Default)]
struct Leased {
    lease: Option<i64>,
    /// key -> JSON value of every instance registered through this client.
    registered: BTreeMap<String, String>,
    /// Leases this client granted that may hold its keys: the current one, and those of
    /// renewals that failed halfway (a key written under one of them is ours until it
    /// expires, although its revocation may have failed too). Only the current one after
    /// a renewal succeeds: it then holds every key recorded.
    granted: Vec<i64>,
}

impl LeaseKeeper {
    /// A keeper with no lease yet (the first registration grants one), its keep-alive
    /// task started on `lifetime`'s tracker.
    pub(super) fn start(
        lifetime: Arc<ClientLifetime>,
        etcd: EtcdClient,
        ttl: Duration,
        request_timeout: Duration,
    ) -> Arc<Self> {
        let (lease_tx, lease_rx) = watch::channel(None);
        let keeper = Arc::new(Self {
            lifetime,
            etcd,
            ttl,
            request_timeout,
            leased: Mutex::new(Leased::default()),
            lease_tx,
            restoring: AtomicBool::new(false),
        });
        keeper
            .lifetime
            .tasks
            .spawn(keep_lease_alive(keeper.clone(), lease_rx));
        keeper
    }

    /// Whether the lease was lost and the registrations are not all written under a new
    /// one yet.
    pub(super) fn is_restoring(&self) -> bool {
        self.restoring.load(Ordering::Relaxed)
    }

    /// Writes `value` at `key` under the lease (granting one first if there is none),
    /// whoever held the key (see "Ownership" above), and records it, so that a new lease
    /// gets it too.
    ///
    /// # Errors
    /// [`RegistryError::Closed`] once the client is closed; [`RegistryError::Operation`]
    /// when a renewal holds the lock longer than a request may take, or etcd fails or does
    /// not answer in time.
    pub(super) async fn put(&self, key: String, value: String) -> Result<(), RegistryError> {
        let mut leased = self.lock("register").await?;
        self.lifetime.check_open()?;
        let fail =
            |failure: Failure<EtcdError>| failure.into_operation(&self.lifetime.url, "register");
        let lease = match leased.lease {
            Some(lease) => lease,
            None => self.renew(&mut leased).await.map_err(fail)?,
        };
        let put = |lease: i64| self.etcd.put(&key, &value, lease);
        match call(self.request_timeout, put(lease)).await {
            Ok(_) => {}
            Err(Failure::Failed(error)) if is_lease_gone(&error) => {
                // The keep-alive task has not noticed yet: renew here, then write.
                let lease = self.renew(&mut leased).await.map_err(fail)?;
                call(self.request_timeout, put(lease)).await.map_err(fail)?;
            }
            Err(failure) => return Err(fail(failure)),
        }
        leased.registered.insert(key, value);
        Ok(())
    }

    /// Deletes `key` if it was registered through this client and still hangs on its
    /// lease; `false` when it was not registered here. A key another lease holds now (a
    /// newer generation's) is left to it.
    ///
    /// # Errors
    /// As [`LeaseKeeper::put`].
    pub(super) async fn delete(&self, key: String) -> Result<bool, RegistryError> {
        let mut leased = self.lock("unregister").await?;
        self.lifetime.check_open()?;
        if leased.registered.remove(&key).is_none() {
            return Ok(false);
        }
        let current = leased.lease.unwrap_or(0);
        let delete = |lease| self.etcd.delete_if_held(&key, lease);
        let held = self.on_our_leases(current, &leased.granted, delete).await;
        match held.map_err(|failure| failure.into_operation(&self.lifetime.url, "unregister"))? {
            Held::Done | Held::Absent => {}
            Held::ByLease(holder) => {
                tracing::info!(url = %self.lifetime.url, key, holder = format_args!("{holder:x}"), "etcd: another lease holds this key now (a newer generation took it over): not deleted");
            }
        }
        Ok(true)
    }

    /// Forgets `key` without deleting it: another client wrote it under its own lease
    /// (a hot upgrade's new process), so it no longer hangs on this client's lease, and
    /// from now on no renewal writes it here again. `false` when it was not recorded.
    pub(super) async fn forget(&self, key: &str) -> Result<bool, RegistryError> {
        let mut leased = self.lock("release").await?;
        Ok(leased.registered.remove(key).is_some())
    }

    /// Closes the client (ends its subscriptions and tasks) and revokes the lease, which
    /// deletes every key attached to it, atomically. Idempotent.
    ///
    /// # Errors
    /// [`RegistryError::Operation`] when etcd fails the revocation or does not answer in
    /// time (the keys then expire with the lease's TTL).
    pub(super) async fn close(&self) -> Result<(), RegistryError> {
        if self.lifetime.is_closed() {
            return Ok(());
        }
        // Under this lock no renewal is half done, so the lease recorded is the one that
        // holds the keys (a renewal cancelled between its writes and its bookkeeping would
        // leave a new lease nobody revokes).
        let mut leased = self.leased.lock().await;
        if self.lifetime.is_closed() {
            return Ok(());
        }
        self.lifetime.stop();
        leased.registered.clear();
        let lease = leased.lease.take();
        let abandoned: Vec<i64> = std::mem::take(&mut leased.granted)
            .into_iter()
            .filter(|granted| Some(*granted) != lease)
            .collect();
        drop(leased);
        // The tasks stop at their next await point; their watch and keep-alive streams are
        // dropped with them.
        self.lifetime.wait_for_tasks(self.request_timeout).await;
        for old in abandoned {
            // Best effort: what a renewal that failed halfway left on it expires anyway.
            let _ = call(self.request_timeout, self.etcd.lease_revoke(old)).await;
        }
        let Some(lease) = lease else {
            return Ok(());
        };
        // A lease etcd no longer knows has nothing left to release.
        match call(self.request_timeout, self.etcd.lease_revoke(lease)).await {
            Ok(_) => {}
            Err(Failure::Failed(error)) if is_lease_gone(&error) => {}
            Err(failure) => return Err(failure.into_operation(&self.lifetime.url, "close")),
        }
        tracing::debug!(url = %self.lifetime.url, lease, "etcd registry closed");
        Ok(())
    }

    fn ttl_seconds(&self) -> i64 {
        i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX)
    }

    /// The lease lock, waiting at most a request's bound for a renewal in progress.
    async fn lock(&self, operation: &'static str) -> Result<MutexGuard<'_, Leased>, RegistryError> {
        tokio::time::timeout(self.request_timeout, self.leased.lock())
            .await
            .map_err(|_| {
                self.lifetime.failed(
                    operation,
                    format!(
                        "lease renewal still in progress after {:?}",
                        self.request_timeout
                    ),
                )
            })
    }

    /// Grants a new lease, writes every registration under it and makes it current. A
    /// key is written only where it is absent or still on one of this client's leases: a
    /// key another lease holds (a newer generation took it over while this client's
    /// lease was lost) is left to it and forgotten, with one log line.
    async fn renew(&self, leased: &mut Leased) -> Result<i64, Failure<EtcdError>> {
        let etcd = &self.etcd;
        let lease = call(self.request_timeout, etcd.lease_grant(self.ttl_seconds())).await?;
        leased.granted.push(lease);
        let previous = leased.lease.unwrap_or(0);
        let mut taken = Vec::new();
        for (key, value) in &leased.registered {
            let put = |previous| etcd.put_if_ours(key, value, lease, previous);
            match self.on_our_leases(previous, &leased.granted, put).await {
                Ok(Held::Done | Held::Absent) => {}
                Ok(Held::ByLease(holder)) => taken.push((key.clone(), holder)),
                Err(failure) => {
                    // Do not leave a half-filled lease behind; the next attempt grants
                    // anew. (Should the revocation fail, the lease stays in `granted`
                    // until it expires: what it holds is still ours.)
                    if call(self.request_timeout, etcd.lease_revoke(lease))
                        .await
                        .is_ok()
                    {
                        leased.granted.retain(|granted| *granted != lease);
                    }
                    return Err(failure);
                }
            }
        }
        for (key, holder) in taken {
            leased.registered.remove(&key);
            tracing::info!(url = %self.lifetime.url, key, holder = format_args!("{holder:x}"), "etcd: another lease holds this key now (a newer generation took it over): left to it, no longer registered here");
        }
        let old = leased.lease.replace(lease);
        // Every key recorded hangs on the new lease now.
        leased.granted = vec![lease];
        self.lease_tx.send_replace(Some(lease));
        if let Some(old) = old {
            // Best effort: the old lease no longer holds any key; let it go now rather
            // than when its TTL runs out.
            let _ = call(self.request_timeout, etcd.lease_revoke(old)).await;
        }
        tracing::info!(url = %self.lifetime.url, lease, registrations = leased.registered.len(), "etcd lease granted");
        Ok(lease)
    }

    /// Runs a write or delete conditional on the key's lease (`request(lease)`) against
    /// `expected`, the lease the key was written under; when another lease of this
    /// client holds it (`granted`: one a renewal left halfway), once more against that
    /// one. What the last request found.
    async fn on_our_leases<F, Fut>(
        &self,
        expected: i64,
        granted: &[i64],
        request: F,
    ) -> Result<Held, Failure<EtcdError>>
    where
        F: Fn(i64) -> Fut,
        Fut: std::future::Future<Output = Result<Held, EtcdError>>,
    {
        match call(self.request_timeout, request(expected)).await? {
            Held::ByLease(holder) if holder != expected && granted.contains(&holder) => {
                call(self.request_timeout, request(holder)).await
            }
            held => Ok(held),
        }
    }

    /// Renews the lease after `lost` was found gone, unless someone already did.
    async fn renew_after_loss(&self, lost: i64) -> Result<(), RegistryError> {
        let mut leased = self.lock("renew lease").await?;
        if leased.lease != Some(lost) || self.lifetime.is_closed() {
            return Ok(());
        }
        if leased.registered.is_empty() {
            // Nothing to keep: the next registration grants a lease.
            leased.lease = None;
            leased.granted.clear();
            self.lease_tx.send_replace(None);
            return Ok(());
        }
        self.renew(&mut leased)
            .await
            .map(|_| ())
            .map_err(|failure| failure.into_operation(&self.lifetime.url, "renew lease"))
    }
}

/// The keep-alive task: renews the current lease, and grants a new one (rewriting every
/// registration) whenever it is lost.
async fn keep_lease_alive(keeper: Arc<LeaseKeeper>, mut lease_rx: watch::Receiver<Option<i64>>) {
    let cancel = keeper.lifetime.closed.clone();
    let mut backoff = Backoff::new();
    loop {
        let lease = loop {
            if let Some(lease) = *lease_rx.borrow_and_update() {
                break lease;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = lease_rx.changed() => if changed.is_err() { return },
            }
        };
        let end = tokio::select! {
            () = cancel.cancelled() => return,
            end = keep_alive(&keeper.etcd, &keeper.lifetime, lease, keeper.ttl, &mut lease_rx, keeper.request_timeout) => end,
        };
        if let KeepAliveEnd::Replaced = end {
            continue;
        }
        tracing::warn!(url = %keeper.lifetime.url, lease, "etcd lease lost; registering again under a new lease");
        keeper.restoring.store(true, Ordering::Relaxed);
        let mut attempts = 0_u32;
        loop {
            let renewed = tokio::select! {
                () = cancel.cancelled() => return,
                renewed = keeper.renew_after_loss(lease) => renewed,
            };
            attempts += 1;
            match renewed {
                Ok(()) => break,
                // The first failure is worth a line; the retries until it holds are not.
                Err(error) if attempts == 1 => {
                    tracing::warn!(url = %keeper.lifetime.url, %error, "etcd lease renewal failed; retrying until it holds");
                }
                Err(error) => {
                    tracing::debug!(url = %keeper.lifetime.url, %error, attempts, "etcd lease renewal failed again")
                }
            }
            if !backoff.wait(&cancel).await {
                return;
            }
        }
        keeper.restoring.store(false, Ordering::Relaxed);
        if attempts > 1 {
            tracing::info!(url = %keeper.lifetime.url, attempts, "etcd registrations hold again");
        }
        backoff.reset();
    }
}
