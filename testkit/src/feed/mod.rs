//! The feed provider: numbered events at an interval, a long server stream that moves
//! when its instance goes offline — the worked example of `rpc::stream`.
//!
//! A subscription sends events `from` up to `until`, one every `interval_ms`. When the
//! handler's [`DrainNotice`] says the instance is going offline, a [`FeedProvider::moving`]
//! provider ends the stream after the event it was sending with [`moved`], the trailer
//! `resume-from` naming the next event; a resumed request that carries `resume-from` in
//! its metadata (the configured rule) starts there. A [`FeedProvider::ignoring`] provider
//! streams on until the drain bound cuts it.

mod follow;

pub use follow::{FeedFollowers, FollowCounts};

use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use proto::feed::feed_server::Feed;
use proto::feed::{Event, SubscribeRequest};
use rpc::stream::{DrainNotice, moved};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

/// The metadata key, in trailers and requests, of the next event to send.
pub const RESUME_FROM: &str = "resume-from";

/// Most events one subscription may ask for.
pub const MAX_EVENTS: u64 = 1_000_000;

/// Longest `interval_ms` a subscription may ask for (a minute).
pub const MAX_INTERVAL_MS: u32 = 60_000;

/// The feed provider.
#[derive(Clone, Debug)]
pub struct FeedProvider {
    /// Told in every event (`Event.provider`).
    name: String,
    /// Whether a stream moves when the instance goes offline, or runs on to the cut.
    moves: bool,
}

impl FeedProvider {
    /// A provider named `name` whose streams move when its instance goes offline.
    pub fn moving(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            moves: true,
        }
    }

    /// A provider named `name` whose streams ignore the notice (cut at the drain bound).
    pub fn ignoring(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            moves: false,
        }
    }
}

/// Where a subscription starts: `resume-from` in its metadata, else its `from`.
fn start_of(request: &Request<SubscribeRequest>) -> Result<u64, Status> {
    match request.metadata().get(RESUME_FROM) {
        None => Ok(request.get_ref().from),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| Status::invalid_argument(format!("{RESUME_FROM} is not a number"))),
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<Event, Status>> + Send>>;

#[tonic::async_trait]
impl Feed for FeedProvider {
    type SubscribeStream = EventStream;

    async fn subscribe(
        &self,
        request: Request<SubscribeRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let notice = self.moves.then(|| DrainNotice::of(&request));
        let from = start_of(&request)?;
        let SubscribeRequest {
            until, interval_ms, ..
        } = request.into_inner();
        if until.saturating_sub(from) > MAX_EVENTS || interval_ms > MAX_INTERVAL_MS {
            return Err(Status::invalid_argument(format!(
                "at most {MAX_EVENTS} events, at most {MAX_INTERVAL_MS} ms apart"
            )));
        }
        let interval = Duration::from_millis(u64::from(interval_ms));
        let provider = self.name.clone();
        let events = events(from, until, interval, provider, notice);
        Ok(Response::new(Box::pin(events)))
    }
}

/// The events `from..until`, one per `interval`; with a `notice`, ended as moved (at an
/// event boundary) once it says the instance is going offline.
fn events(
    from: u64,
    until: u64,
    interval: Duration,
    provider: String,
    notice: Option<DrainNotice>,
) -> impl Stream<Item = Result<Event, Status>> + Send {
    futures_util::stream::unfold(Some(from), move |next| {
        let provider = provider.clone();
        let notice = notice.clone();
        async move {
            let seq = next?;
            if seq >= until {
                return None;
            }
            if seq > from {
                let pause = tokio::time::sleep(interval);
                match &notice {
                    Some(notice) => {
                        tokio::select! {
                            () = pause => {}
                            () = notice.draining() => {}
                        }
                    }
                    None => pause.await,
                }
            }
            if notice.as_ref().is_some_and(DrainNotice::is_draining) {
                let mut resume = MetadataMap::new();
                resume.insert(RESUME_FROM, seq.into());
                return Some((Err(moved(resume)), None));
            }
            Some((Ok(Event { seq, provider }), Some(seq + 1)))
        }
    })
}

/// The feed's service name.
pub const SERVICE: &str = "feed.Feed";

/// A reference to the feed in `group` whose `Subscribe` is resumable (the configured
/// rule: the same request, with the moved stream's `resume-from` as its metadata).
pub fn resumable_reference(group: &str) -> rpc::cluster::ReferenceConfig {
    let mut reference = rpc::cluster::ReferenceConfig::default();
    reference.group = group.to_owned();
    reference
        .methods
        .entry("Subscribe".to_owned())
        .or_default()
        .resumable = true;
    reference
}
