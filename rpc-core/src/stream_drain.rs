//! Telling stream handlers that their instance has begun to go offline, so that a
//! long stream ends at a message boundary as "moved" instead of being cut at the
//! drain bound.
//!
//! The lifecycle owns one [`StreamDrain`] per application and tells it when draining
//! starts: shutdown step 1 (a stop or a rolling restart), a hot upgrade's drain (after
//! the hand-over, as the connections get GOAWAY), and a manual offline of a service. The
//! provider filter puts a [`DrainNotice`] into every request's extensions; a handler
//! takes it with [`DrainNotice::of`] and ends its stream with [`moved`] when
//! [`DrainNotice::draining`] resolves, carrying in the trailers what the next instance
//! resumes from. Our consumers re-open a stream of a method declared resumable on
//! another instance (lossless-rpc-cluster's `resume`); any other gRPC client gets the
//! `UNAVAILABLE` status and the trailers unchanged, and can do the same.
//!
//! A handler that ignores the notice is cut at the drain bound, as before, and counted
//! as cut; one that ends with [`moved`] is counted as moved ([`StreamDrain::moved`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use http::uri::PathAndQuery;
use http::{HeaderValue, Uri};
use tokio::sync::watch;
use tonic::metadata::MetadataMap;

use crate::OfflineServices;
use crate::exported_spans::DeployAction;
use crate::metadata::STREAM_MOVED;
use crate::offline_services::service_of;
use crate::step_span::StepSpan;

/// The message of a stream that ended because its instance is going offline.
pub const MOVED_MESSAGE: &str =
    "stream moved: the provider is going offline; resume on another instance";

/// Whether the streams of one application are told to end, and how many did end as
/// moved. Shared by the lifecycle (which tells it) and the provider filter (which hands
/// out notices and counts moved streams). Cheap to clone (one `Arc`).
#[derive(Clone, Debug)]
pub struct StreamDrain {
    state: Arc<DrainState>,
}

#[derive(Debug)]
struct DrainState {
    /// Every stream of the application is told (a stop or a hot upgrade's drain).
    all: AtomicBool,
    /// The services manually offline: their streams are told too.
    offline: OfflineServices,
    /// Bumped on every change, so that waiting notices look again.
    changed: watch::Sender<()>,
    /// Streams that ended with the moved status.
    moved: AtomicUsize,
    /// Set the first time any stream may have been told (every stream, or a service
    /// manually offline), and never cleared: until then no stream can end as moved, and
    /// trailers need not be looked at for the mark.
    ever_told: AtomicBool,
    /// The shutdown or upgrade step running now, which a refused or moved call is
    /// linked to.
    step_span: StepSpan,
}

impl StreamDrain {
    /// Nothing told yet; the streams of services in `offline` are told while they are
    /// offline (after [`StreamDrain::services_changed`]).
    pub fn new(offline: OfflineServices) -> Self {
        Self {
            state: Arc::new(DrainState {
                all: AtomicBool::new(false),
                offline,
                changed: watch::Sender::new(()),
                moved: AtomicUsize::new(0),
                ever_told: AtomicBool::new(false),
                step_span: StepSpan::new(),
            }),
        }
    }

    /// The span of the lifecycle step running now (set by the lifecycle's steps): the
    /// provider filter links a call it refuses, and a stream that ends as moved, to it.
    pub fn step_span(&self) -> &StepSpan {
        &self.state.step_span
    }

    /// Tells every stream, now and from now on, that its instance is going offline.
    pub fn tell_all(&self) {
        self.state.ever_told.store(true, Ordering::Release);
        if !self.state.all.swap(true, Ordering::AcqRel) {
            self.state.changed.send_replace(());
        }
    }

    /// Whether [`StreamDrain::tell_all`] was called.
    pub fn told_all(&self) -> bool {
        self.state.all.load(Ordering::Acquire)
    }

    /// The set of manually offline services changed: notices of their streams resolve.
    pub fn services_changed(&self) {
        self.state.ever_told.store(true, Ordering::Release);
        self.state.changed.send_replace(());
    }

    /// The notice for a request of `path` (`/helloworld.Greeter/SayHello`); a path that
    /// is not one gives a notice told only with the whole instance.
    pub fn notice(&self, path: &str) -> DrainNotice {
        DrainNotice {
            drain: Some(self.clone()),
            path: PathAndQuery::try_from(path).ok(),
        }
    }

    /// The notice for a request of `uri`: as [`StreamDrain::notice`], sharing the URI's
    /// bytes instead of copying its path. The provider filter hands one to every
    /// request, so the service is looked for only when a handler asks.
    pub fn notice_of(&self, uri: &Uri) -> DrainNotice {
        DrainNotice {
            drain: Some(self.clone()),
            path: uri.path_and_query().cloned(),
        }
    }

    /// Whether any stream may have been told so far (and so may end as moved): false
    /// until the first [`StreamDrain::tell_all`] or [`StreamDrain::services_changed`].
    pub fn may_have_told(&self) -> bool {
        self.state.ever_told.load(Ordering::Acquire)
    }

    /// Counts one stream that ended with the moved status (the provider filter, when it
    /// sees the trailers).
    pub fn note_moved(&self) {
        self.state.moved.fetch_add(1, Ordering::Relaxed);
        // The stream's span is current here (the provider filter runs inside it).
        self.state.step_span.link_current_call(DeployAction::Moved);
    }

    /// Streams that ended with the moved status so far.
    pub fn moved(&self) -> usize {
        self.state.moved.load(Ordering::Relaxed)
    }
}

/// A stream handler's notice that its instance has begun to go offline: take it with
/// [`DrainNotice::of`] from the request, and end the stream with [`moved`] once
/// [`DrainNotice::draining`] resolves.
///
/// A request not served through rpc's provider filter (a plain tonic server, a unit
/// test) gives a notice that never resolves. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct DrainNotice {
    drain: Option<StreamDrain>,
    /// The request's path, whose service a manual offline may tell.
    path: Option<PathAndQuery>,
}

impl DrainNotice {
    /// The notice of `request` (rpc's provider filter puts one in every request's
    /// extensions), or one that never resolves when it has none.
    pub fn of<T>(request: &tonic::Request<T>) -> DrainNotice {
        request
            .extensions()
            .get::<DrainNotice>()
            .cloned()
            .unwrap_or_default()
    }

    /// Whether the instance has begun to go offline for this request's service: it is
    /// stopping, handing over to a hot upgrade's new process, or the service is
    /// manually offline.
    pub fn is_draining(&self) -> bool {
        let Some(drain) = &self.drain else {
            return false;
        };
        drain.told_all()
            || self
                .path
                .as_ref()
                .is_some_and(|path| drain.state.offline.covers_service(service_of(path.path())))
    }

    /// Resolves when [`DrainNotice::is_draining`] holds (at once if it already does);
    /// never, for a notice of a request served without rpc's provider filter.
    pub async fn draining(&self) {
        let Some(drain) = &self.drain else {
            return std::future::pending().await;
        };
        // Subscribed before the check, so a change between the two is not missed.
        let mut changes = drain.state.changed.subscribe();
        while !self.is_draining() {
            if changes.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

/// The status a stream handler ends its stream with when its instance goes offline:
/// `UNAVAILABLE` with [`MOVED_MESSAGE`], the `rpc-stream-moved: 1` trailer, and
/// `resume_from` — what the next instance needs to continue the stream (for example
/// the sequence number of the last message sent). Our consumers re-open a resumable
/// method's stream elsewhere, with these trailers as the new request's metadata; a
/// plain gRPC client sees an ordinary `UNAVAILABLE` with the trailers, and may do the
/// same. Keys of gRPC (`grpc-`) and of rpc (`rpc-`) in `resume_from` are dropped.
pub fn moved(resume_from: MetadataMap) -> tonic::Status {
    let mut trailers = application_keys(resume_from.into_headers());
    let mut status = tonic::Status::unavailable(MOVED_MESSAGE);
    trailers.insert(STREAM_MOVED, HeaderValue::from_static("1"));
    *status.metadata_mut() = MetadataMap::from_headers(trailers);
    status
}

/// `headers` without the keys gRPC and rpc reserve.
fn application_keys(headers: http::HeaderMap) -> http::HeaderMap {
    let mut kept = http::HeaderMap::with_capacity(headers.len());
    let mut name = None;
    for (key, value) in headers {
        // `None` repeats the previous key (a key with several values).
        name = key.or(name);
        if let Some(name) = &name
            && !is_reserved(name.as_str())
        {
            kept.append(name.clone(), value);
        }
    }
    kept
}

/// Whether a metadata key belongs to gRPC or rpc rather than to the application.
pub fn is_reserved(name: &str) -> bool {
    name.starts_with("grpc-") || name.starts_with("rpc-") || name.starts_with(':')
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn request(path: &str, drain: &StreamDrain) -> tonic::Request<()> {
        let mut request = tonic::Request::new(());
        request.extensions_mut().insert(drain.notice(path));
        request
    }

    #[tokio::test(start_paused = true)]
    async fn a_notice_resolves_when_everything_is_told_and_not_before() {
        let drain = StreamDrain::new(OfflineServices::new());
        let notice = DrainNotice::of(&request("/a.B/C", &drain));
        assert!(!notice.is_draining());
        let waiting = tokio::spawn({
            let notice = notice.clone();
            async move { notice.draining().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        drain.tell_all();
        waiting.await.unwrap();
        assert!(notice.is_draining());
        // Resolves at once when already told.
        notice.draining().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_manually_offline_service_tells_its_streams_only() {
        let offline = OfflineServices::new();
        let drain = StreamDrain::new(offline.clone());
        let greeter = DrainNotice::of(&request("/helloworld.Greeter/Stream", &drain));
        let echo = DrainNotice::of(&request("/echo.Echo/Stream", &drain));
        let waiting = tokio::spawn({
            let greeter = greeter.clone();
            async move { greeter.draining().await }
        });
        offline.set(vec![Arc::from("helloworld.Greeter")], 2);
        drain.services_changed();
        waiting.await.unwrap();
        assert!(greeter.is_draining());
        assert!(!echo.is_draining());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_a_notice_never_drains() {
        let notice = DrainNotice::of(&tonic::Request::new(()));
        assert!(!notice.is_draining());
        let waited = tokio::time::timeout(Duration::from_secs(60), notice.draining()).await;
        assert!(waited.is_err());
    }

    #[test]
    fn the_moved_status_keeps_application_keys_and_marks_itself() {
        let mut resume = MetadataMap::new();
        resume.insert("resume-after", "41".parse().unwrap());
        resume.insert("grpc-status", "0".parse().unwrap());
        resume.insert("rpc-closing", "1".parse().unwrap());
        let status = moved(resume);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), MOVED_MESSAGE);
        let metadata = status.metadata();
        assert_eq!(metadata.get("resume-after").unwrap(), "41");
        assert_eq!(metadata.get("rpc-stream-moved").unwrap(), "1");
        assert!(metadata.get("grpc-status").is_none());
        assert!(metadata.get("rpc-closing").is_none());
    }
}
