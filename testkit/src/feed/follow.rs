//! Subscribers that follow feeds for a whole run and check every event: the streams of
//! `rolling-deploy --streams resumable` and `hot-upgrade --streams resumable`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use proto::feed::SubscribeRequest;
use proto::feed::feed_client::FeedClient;
use rpc::ReferenceChannel;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::MAX_EVENTS;

/// What the followers saw, shared with their tasks.
#[derive(Debug, Default)]
pub struct FollowCounts {
    /// Subscriptions opened.
    pub opened: AtomicU64,
    /// Events received in order.
    pub events: AtomicU64,
    /// Subscriptions that ended before they were stopped (an error, or the end of the
    /// stream), or that skipped or repeated an event: cut.
    pub cut: AtomicU64,
    /// What went wrong (at most 10).
    pub samples: Mutex<Vec<String>>,
}

impl FollowCounts {
    fn cut(&self, what: String) {
        self.cut.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.samples.lock();
        if samples.len() < 10 {
            samples.push(what);
        }
    }
}

/// Feeds followed from their first event until [`FeedFollowers::stop`].
#[derive(Debug)]
pub struct FeedFollowers {
    counts: Arc<FollowCounts>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl FeedFollowers {
    /// `count` subscriptions through `client`, each of events `interval` apart.
    pub fn start(client: FeedClient<ReferenceChannel>, count: usize, interval: Duration) -> Self {
        let counts = Arc::new(FollowCounts::default());
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        for n in 0..count {
            let follower = follow(n, client.clone(), interval, counts.clone(), stopped.clone());
            tasks.spawn(follower);
        }
        Self {
            counts,
            stop,
            tasks,
        }
    }

    /// What the followers saw so far.
    pub fn counts(&self) -> &Arc<FollowCounts> {
        &self.counts
    }

    /// Stops every follower (a subscription still running then is not cut) and waits
    /// for them.
    pub async fn stop(mut self) -> Arc<FollowCounts> {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.counts
    }
}

/// One follower: subscribes, and checks that event `n + 1` follows event `n`.
async fn follow(
    n: usize,
    mut client: FeedClient<ReferenceChannel>,
    interval: Duration,
    counts: Arc<FollowCounts>,
    mut stopped: watch::Receiver<bool>,
) {
    let request = SubscribeRequest {
        from: 0,
        until: MAX_EVENTS,
        interval_ms: u32::try_from(interval.as_millis()).unwrap_or(u32::MAX),
    };
    counts.opened.fetch_add(1, Ordering::Relaxed);
    let mut stream = tokio::select! {
        _ = stopped.wait_for(|stop| *stop) => return,
        opened = client.subscribe(request) => match opened {
            Ok(response) => response.into_inner(),
            Err(status) => return counts.cut(format!("feed {n}: {status}")),
        },
    };
    let mut expected = 0;
    loop {
        let next = tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => return,
            next = stream.message() => next,
        };
        match next {
            Ok(Some(event)) if event.seq == expected => {
                expected += 1;
                counts.events.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Some(event)) => {
                return counts.cut(format!(
                    "feed {n}: event {} where {expected} was due",
                    event.seq
                ));
            }
            Ok(None) => return counts.cut(format!("feed {n}: ended after {expected} events")),
            Err(status) => {
                return counts.cut(format!("feed {n}: {status} after {expected} events"));
            }
        }
    }
}
