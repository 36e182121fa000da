//! Following one service in etcd: read its prefix, then watch the prefix from the
//! revision of that read plus one, so that no change between the read and the watch is
//! lost. When the watch breaks (connection lost, revision compacted) the loop reads and
//! watches again after a short backoff; in between the consumer keeps the last set.
//!
//! etcd ends a watch with a response that says `canceled`: its start revision was
//! compacted (`compact_revision` says up to where), or the watch is not permitted (e.g.
//! its token expired: the read that follows authenticates again). The watch is then dead
//! (no further event comes on it), so the loop treats it as broken: it reads again, which
//! gives a revision past any compaction, and watches from there. A watch this loop no
//! longer follows is dropped, which resets its stream and ends it in etcd.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rpc_core::{BoxError, Instance, SubscriptionId};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::etcd::client::EtcdClient;
use crate::etcd::codec::decode;
use crate::etcd::error::{EtcdError, call};
use crate::etcd::proto::etcdserverpb::WatchResponse;
use crate::etcd::proto::mvccpb::event::EventType;
use crate::etcd::watch_stream::Watch;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, Failure};
use crate::remote::snapshots::{SnapshotPublisher, to_revision};

/// How long a watch may stay quiet before its member is asked for a progress
/// notification, which it must answer within the request timeout: a member cut off
/// without a reset (its host gone, a partition) is left within `QUIET` + the request
/// timeout, and the consumer reads the service again from a member that answers. One
/// check per member, not per watch (`member_heard.rs`): an idle consumer asks each
/// member it watches on once per `QUIET`, however many services it follows. Seen
/// in the lab (tests/tests/lab_cluster.rs) before this check: a consumer whose watch was
/// on a partitioned etcd leader kept a stale list until HTTP/2's keep-alive gave up
/// (10 s + 3 s), long enough for a rolling deploy to replace every provider it knew.
const QUIET: Duration = Duration::from_secs(1);

/// The instances of one service by their key, as last read or watched.
pub(super) type InstancesByKey = BTreeMap<Vec<u8>, Instance>;

/// One subscription's view of etcd: the prefix of its service and what reading it takes.
pub(super) struct ServiceWatch {
    /// Its client's URL (for logs) and subscriptions (to forget this one when it ends).
    lifetime: Arc<ClientLifetime>,
    etcd: EtcdClient,
    /// Bound on each read and on opening the watch.
    request_timeout: Duration,
    /// The service's key prefix (ends with `/`).
    prefix: String,
}

impl ServiceWatch {
    /// A watch of the service whose keys start with `prefix`.
    pub(super) fn new(
        lifetime: Arc<ClientLifetime>,
        etcd: EtcdClient,
        request_timeout: Duration,
        prefix: String,
    ) -> Self {
        Self {
            lifetime,
            etcd,
            request_timeout,
            prefix,
        }
    }

    /// Reads the instances of the service, with the revision of the read.
    pub(super) async fn read(&self) -> Result<(u64, InstancesByKey), Failure<EtcdError>> {
        let response = call(
            self.request_timeout,
            self.etcd.range_prefix(self.prefix.as_bytes(), false),
        )
        .await?;
        let revision = response.header.map_or(0, |h| to_revision(h.revision));
        let mut known = BTreeMap::new();
        for kv in response.kvs {
            if let Some(instance) = decode(&self.lifetime.url, &kv.key, &kv.value) {
                known.insert(kv.key, instance);
            }
        }
        Ok((revision, known))
    }

    /// The subscription's loop, from the first read (already published): follow the watch,
    /// reading again whenever it breaks.
    pub(super) async fn run(
        self,
        id: SubscriptionId,
        cancel: CancellationToken,
        mut publisher: SnapshotPublisher,
        (mut revision, mut known): (u64, InstancesByKey),
    ) {
        let url = &self.lifetime.url;
        let prefix = &self.prefix;
        let mut backoff = Backoff::new();
        loop {
            let broke = tokio::select! {
                () = cancel.cancelled() => break,
                error = self.follow(&mut known, &mut revision, &mut publisher) => match error {
                    Some(error) => error,
                    None => break,
                },
            };
            tracing::warn!(%url, %prefix, error = %broke, "etcd watch interrupted; keeping the last known instances and retrying");
            loop {
                if !backoff.wait(&cancel).await || publisher.is_closed() {
                    self.lifetime.subscriptions.forget(id);
                    return;
                }
                match self.read().await {
                    Ok((read_revision, read_known)) => {
                        revision = read_revision;
                        known = read_known;
                        publisher.publish(revision, known.values().cloned().collect());
                        backoff.reset();
                        break;
                    }
                    Err(failure) => {
                        tracing::debug!(%url, %prefix, error = %failure.into_source(), "etcd read failed; retrying");
                    }
                }
            }
        }
        self.lifetime.subscriptions.forget(id);
    }

    /// The watch's next message. After [`QUIET`] without one, unless another watch on
    /// the same member heard from it meanwhile, the member is checked: one quiet watch
    /// asks it for a progress notification, and every quiet watch on it waits for the
    /// answer (any message on any of them); a member that says nothing within the
    /// request timeout is an error (the watch is left).
    async fn next_message(
        &self,
        watch: &mut Watch,
    ) -> Result<Result<Option<WatchResponse>, EtcdError>, BoxError> {
        let member = watch.member().clone();
        let mut quiet_until = Instant::now() + QUIET;
        loop {
            if let Ok(message) = tokio::time::timeout_at(quiet_until, watch.message()).await {
                return Ok(message);
            }
            // Another watch heard the member meanwhile: quiet only from then on.
            let heard_until = member.last().at + QUIET;
            if heard_until > Instant::now() {
                quiet_until = heard_until;
                continue;
            }
            let seen = member.last().messages;
            watch.check_member();
            let answer = async {
                tokio::select! {
                    message = watch.message() => Some(message),
                    () = member.heard_beyond(seen) => None,
                }
            };
            match tokio::time::timeout(self.request_timeout, answer).await {
                Ok(Some(message)) => return Ok(message),
                // Another watch heard the member: it answers.
                Ok(None) => quiet_until = Instant::now() + QUIET,
                Err(_) => {
                    return Err(format!(
                        "the member did not answer the watch's progress check within {:?}",
                        self.request_timeout
                    )
                    .into());
                }
            }
        }
    }

    /// Follows the watch of the prefix from `revision + 1`, publishing every change, until
    /// the watch breaks (its error) or the consumer drops its stream (`None`).
    async fn follow(
        &self,
        known: &mut InstancesByKey,
        revision: &mut u64,
        publisher: &mut SnapshotPublisher,
    ) -> Option<BoxError> {
        let start = i64::try_from(*revision)
            .unwrap_or(i64::MAX)
            .saturating_add(1);
        let mut watch = match call(
            self.request_timeout,
            self.etcd.watch_prefix(self.prefix.as_bytes(), start),
        )
        .await
        {
            Ok(watch) => watch,
            Err(failure) => return Some(failure.into_source()),
        };
        loop {
            let message = tokio::select! {
                () = publisher.closed() => return None,
                message = self.next_message(&mut watch) => match message {
                    Ok(message) => message,
                    Err(silent) => return Some(silent),
                },
            };
            let response = match message {
                Ok(Some(response)) => response,
                Ok(None) => return Some("the watch stream ended".into()),
                Err(error) => return Some(error.into()),
            };
            if response.canceled {
                return Some(
                    format!(
                        "etcd cancelled the watch (compacted at {}): {}",
                        response.compact_revision, response.cancel_reason
                    )
                    .into(),
                );
            }
            if response.events.is_empty() {
                continue;
            }
            for event in response.events {
                let Some(kv) = event.kv else { continue };
                match EventType::try_from(event.r#type) {
                    Ok(EventType::Put) => match decode(&self.lifetime.url, &kv.key, &kv.value) {
                        Some(instance) => {
                            known.insert(kv.key, instance);
                        }
                        None => {
                            known.remove(&kv.key);
                        }
                    },
                    Ok(EventType::Delete) => {
                        known.remove(&kv.key);
                    }
                    Err(_) => {
                        tracing::warn!(url = %self.lifetime.url, key = %String::from_utf8_lossy(&kv.key), kind = event.r#type, "ignoring an etcd event of unknown type");
                        continue;
                    }
                }
                *revision = (*revision).max(to_revision(kv.mod_revision));
            }
            if let Some(header) = response.header {
                *revision = (*revision).max(to_revision(header.revision));
            }
            publisher.publish(*revision, known.values().cloned().collect());
        }
    }
}
