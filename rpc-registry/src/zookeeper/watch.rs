//! Following one service in ZooKeeper: list its providers directory with a one-shot
//! children watch, read each child, publish the set, and list again (re-arming the watch)
//! after every event and after a new session. Snapshot revisions are the directory's
//! `pzxid`, the zxid of the last child created or deleted, which only increases. While the
//! session is being re-established the consumer keeps the last set.
//!
//! `zookeeper-client` panics in a watcher whose session task went away without a final
//! event: the wait on a watch is wrapped so that such a panic ends it as a lost session (a
//! new session is then opened) instead of unwinding through the subscription.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::join_all;
use rpc_core::{Instance, ServiceKey, SubscriptionId};
use tokio_util::sync::CancellationToken;
use zookeeper_client::{Client, Error as ZkError, OneshotWatcher};

use crate::dubbo::Entry;
use crate::remote::lifetime::ClientLifetime;
use crate::remote::retry::{Backoff, bounded};
use crate::remote::snapshots::{SnapshotPublisher, to_revision};
use crate::zookeeper::codec::{NodeLayout, directory_node};
use crate::zookeeper::session::SessionKeeper;

/// One read of a providers directory: its revision, its instances, and the watch armed
/// by the listing.
pub(super) type Listing = (u64, Vec<Instance>, OneshotWatcher);

/// One subscription's view of ZooKeeper: the providers directory of its service and the
/// sessions it reads through.
pub(super) struct ServiceWatch {
    /// Its client's URL (for logs) and subscriptions (to forget this one when it ends).
    lifetime: Arc<ClientLifetime>,
    /// The sessions, and where to report one that looks dead.
    session: Arc<SessionKeeper>,
    /// The service followed.
    service: ServiceKey,
    /// Its providers directory.
    directory: String,
    /// How its children are read.
    layout: NodeLayout,
}

impl ServiceWatch {
    /// A watch of the providers of `service`, in `layout`.
    pub(super) fn new(
        lifetime: Arc<ClientLifetime>,
        session: Arc<SessionKeeper>,
        layout: NodeLayout,
        service: ServiceKey,
    ) -> Self {
        Self {
            lifetime,
            session,
            directory: layout.providers_path(&service),
            service,
            layout,
        }
    }

    /// Lists the directory with a children watch and reads every child (unbounded: callers
    /// bound it). A directory nobody registered in yet is created, as providers would.
    pub(super) async fn read(&self, client: &Client) -> Result<Listing, ZkError> {
        let directory = self.directory.as_str();
        let (children, stat, watcher) = match client.get_and_watch_children(directory).await {
            Ok(listed) => listed,
            Err(ZkError::NoNode) => {
                client.mkdir(directory, &directory_node()).await?;
                client.get_and_watch_children(directory).await?
            }
            Err(error) => return Err(error),
        };
        let reads = children.iter().map(|child| async move {
            let path = format!("{directory}/{child}");
            if !self.layout.reads_data() {
                return (Ok(Vec::new()), child, path);
            }
            (
                client.get_data(&path).await.map(|(data, _)| data),
                child,
                path,
            )
        });
        let mut instances = Vec::with_capacity(children.len());
        for (read, child, path) in join_all(reads).await {
            let data = match read {
                Ok(data) => data,
                // Deleted between the listing and the read: the watch reports it.
                Err(ZkError::NoNode) => continue,
                Err(error) => return Err(error),
            };
            match self.layout.decode(&self.service, child, &data) {
                Entry::Provider(instance) => instances.push(instance),
                Entry::Other => {}
                Entry::Unusable(reason) => {
                    self.lifetime
                        .unusable
                        .skip(&self.lifetime.url, &path, &reason)
                }
            }
        }
        Ok((to_revision(stat.pzxid), instances, watcher))
    }

    /// The subscription's loop, from the first listing (already published) and the watch
    /// it armed: wait for the watch or a new session, list again, publish.
    pub(super) async fn run(
        self,
        id: SubscriptionId,
        cancel: CancellationToken,
        mut publisher: SnapshotPublisher,
        mut watcher: Option<OneshotWatcher>,
    ) {
        let url = &self.lifetime.url;
        let directory = &self.directory;
        let request_timeout = self.session.request_timeout();
        let mut sessions = self.session.sessions();
        let mut backoff = Backoff::new();
        loop {
            // Wait for the armed watch to fire, or the session to change.
            if let Some(armed) = watcher.take() {
                let fired = AssertUnwindSafe(armed.changed()).catch_unwind();
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = publisher.closed() => break,
                    _ = sessions.changed() => {}
                    event = fired => match event {
                        Ok(event) if event.session_state.is_terminated() => self.session.report_lost(),
                        Ok(_) => {}
                        Err(_) => {
                            tracing::warn!(%url, %directory, "the ZooKeeper watcher panicked; treating the session as lost");
                            self.session.report_lost();
                        }
                    },
                }
            }
            // The current session (waiting while a new one is being opened).
            let client = tokio::select! {
                () = cancel.cancelled() => break,
                () = publisher.closed() => break,
                session = sessions.wait_for(Option::is_some) => match session {
                    Ok(session) => session.clone(),
                    Err(_) => break,
                },
            };
            let Some(client) = client else { break };
            let read = tokio::select! {
                () = cancel.cancelled() => break,
                read = bounded(request_timeout, self.read(&client)) => read,
            };
            match read {
                Ok((revision, instances, armed)) => {
                    publisher.publish(revision, instances);
                    watcher = Some(armed);
                    backoff.reset();
                }
                Err(failure) => {
                    self.session.note(&failure);
                    tracing::debug!(%url, %directory, error = %failure.into_source(), "ZooKeeper read failed; keeping the last known instances");
                    if !backoff.wait(&cancel).await {
                        break;
                    }
                }
            }
        }
        self.lifetime.subscriptions.forget(id);
    }
}
