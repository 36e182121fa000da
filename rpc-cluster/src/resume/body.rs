//! The caller's body of a resumable stream: the messages of each instance the stream
//! goes through, one after the other, re-opened when a provider moves it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{HeaderMap, Request, Response};
use http_body::{Body, Frame};
use http_body_util::Full;
use rpc_core::metadata::{
    GRPC_STATUS, GRPC_TIMEOUT, STREAM_MOVED, deadline_exceeded, grpc_timeout, status_trailers,
};
use rpc_core::{BoxError, InstanceId};
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::body::Body as TonicBody;
use tonic::metadata::MetadataMap;
use tower::ServiceExt;

use super::messages::MessageTracker;
use super::request_head::{RequestHead, application_keys, framed, served_by, timeout_value};
use super::rules::ResumableMethods;
use super::{MAX_EMPTY_MOVES, MovedStream, ResumeAttempt, ResumeInner, ResumeRule};

/// The first wait before re-opening a stream that moved with no message since its last
/// move; doubled for each further one, up to [`LONGEST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(25);
/// The longest wait between two empty moves.
const LONGEST_BACKOFF: Duration = Duration::from_secs(1);

type Answer = Result<Response<TonicBody>, BoxError>;

/// What re-opening one resumable stream needs, and what it has seen so far.
pub(super) struct ResumedStream<S> {
    inner: S,
    methods: ResumableMethods,
    rule: Arc<dyn ResumeRule>,
    head: RequestHead,
    /// The original request message, without its prefix.
    request: Bytes,
    messages: MessageTracker,
    /// The instance serving the stream now, as the cluster reported it.
    served_by: Option<InstanceId>,
    /// Messages delivered when the stream last moved.
    delivered_at_move: u64,
    /// Moves in a row with no message in between.
    empty_moves: u32,
    /// The caller's deadline, over the whole stream, and its length.
    deadline: Option<(Instant, Duration)>,
    /// The request of the re-open to make next, with the metadata from the trailers.
    next: Option<(Bytes, HeaderMap)>,
    /// The trailers of the latest move: what the caller gets if no instance takes the
    /// stream on (so that it can still follow the moved rule itself).
    last_moved: Option<HeaderMap>,
    /// A re-open answered and no message has come since: counted as resumed at the
    /// first one.
    awaiting_message: bool,
}

/// What a move leads to.
enum AfterMove {
    /// Re-open now.
    Reopen,
    /// Re-open after this wait.
    Wait(Duration),
    /// The caller's stream ends with these trailers.
    End(HeaderMap),
}

impl<S> ResumedStream<S>
where
    S: ResumeInner,
{
    /// A stream of the request `framed` (gRPC-framed, as the generated client sent it).
    pub(super) fn new(
        inner: S,
        methods: ResumableMethods,
        rule: Arc<dyn ResumeRule>,
        head: RequestHead,
        framed: Bytes,
    ) -> Self {
        let deadline = grpc_timeout(&head.headers).map(|limit| (Instant::now() + limit, limit));
        let request = if framed.len() >= 5 {
            framed.slice(5..)
        } else {
            Bytes::new()
        };
        Self {
            inner,
            methods,
            rule,
            head,
            request,
            messages: MessageTracker::default(),
            served_by: None,
            delivered_at_move: 0,
            empty_moves: 0,
            deadline,
            next: None,
            last_moved: None,
            awaiting_message: false,
        }
    }

    /// The caller's response to `response`, the first answer: a body that resumes. A
    /// first answer that is itself moved (trailers-only: the handler returned the moved
    /// status before its stream began) is re-opened at once, before the caller gets
    /// headers; any other trailers-only answer is the caller's as it is.
    pub(super) async fn answer(
        mut self,
        mut response: Response<TonicBody>,
    ) -> Result<Response<TonicBody>, BoxError> {
        loop {
            self.served_by = served_by(&mut response);
            let headers = response.headers();
            if !headers.contains_key(GRPC_STATUS) {
                self.awaiting_message = self.last_moved.is_some();
                return Ok(response.map(|body| {
                    TonicBody::new(ResumingBody {
                        current: Some(body),
                        reopening: None,
                        backoff: None,
                        stream: self,
                    })
                }));
            }
            if !headers.contains_key(STREAM_MOVED) {
                if self.last_moved.is_some() {
                    self.methods.note_not_resumed();
                }
                return Ok(response);
            }
            match self.after_move(headers.clone()) {
                AfterMove::End(trailers) => return Ok(trailers_only(response, trailers)),
                AfterMove::Wait(wait) => tokio::time::sleep(wait).await,
                AfterMove::Reopen => {}
            }
            let call = match self.reopen() {
                Ok(call) => call,
                Err(trailers) => return Ok(trailers_only(response, trailers)),
            };
            response = match call.await {
                Ok(next) => next,
                Err(error) => {
                    let trailers = self.not_taken(error);
                    return Ok(trailers_only(response, trailers));
                }
            };
        }
    }

    /// The trailers that end the caller's stream when no instance took it on after a
    /// move (`error`: why the re-open failed): the latest move's, so that the caller sees
    /// the moved status and can follow the rule itself.
    fn not_taken(&mut self, error: BoxError) -> HeaderMap {
        self.methods.note_not_resumed();
        let status = Status::from_error(error);
        tracing::warn!(path = %self.head.uri.path(), %status, "a moved stream could not be re-opened: the caller gets the moved status");
        self.last_moved
            .take()
            .unwrap_or_else(|| status_trailers(&status))
    }

    /// What to do now that the stream moved with `trailers`.
    fn after_move(&mut self, trailers: HeaderMap) -> AfterMove {
        self.methods.note_moved();
        let delivered = self.messages.delivered();
        if self.messages.in_message() {
            tracing::warn!(path = %self.head.uri.path(), "a stream moved in the middle of a message: not resumed");
            return self.end(trailers);
        }
        if delivered > self.delivered_at_move {
            self.empty_moves = 0;
        } else {
            self.empty_moves += 1;
        }
        self.delivered_at_move = delivered;
        self.last_moved = Some(trailers.clone());
        if self.empty_moves > MAX_EMPTY_MOVES {
            tracing::warn!(path = %self.head.uri.path(), moves = self.empty_moves, "a stream kept moving with no message: not resumed");
            return self.end(trailers);
        }
        let metadata = MetadataMap::from_headers(application_keys(&trailers));
        let moved = MovedStream {
            request: &self.request,
            last_message: self.messages.last(),
            delivered,
            trailers: &metadata,
        };
        let Some(request) = self.rule.resume(&moved) else {
            return self.end(trailers);
        };
        self.next = Some((request, application_keys(&trailers)));
        match self.empty_moves {
            0 => AfterMove::Reopen,
            n => AfterMove::Wait(backoff(n)),
        }
    }

    fn end(&self, trailers: HeaderMap) -> AfterMove {
        self.methods.note_not_resumed();
        AfterMove::End(trailers)
    }

    /// The re-open of the stream with the request [`ResumedStream::after_move`] made,
    /// or the trailers that end the caller's stream when its deadline has passed.
    fn reopen(&mut self) -> Result<BoxFuture<'static, Answer>, HeaderMap> {
        let (message, metadata) = self.next.take().unwrap_or_default();
        let mut headers = self.head.headers.clone();
        for name in metadata.keys() {
            headers.remove(name);
        }
        for (name, value) in &metadata {
            headers.append(name.clone(), value.clone());
        }
        if let Some((deadline, limit)) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.methods.note_not_resumed();
                return Err(status_trailers(&deadline_exceeded(limit)));
            }
            headers.insert(GRPC_TIMEOUT, timeout_value(left));
        }
        let mut request = Request::new(TonicBody::new(Full::new(framed(&message))));
        *request.method_mut() = self.head.method.clone();
        *request.uri_mut() = self.head.uri.clone();
        *request.version_mut() = self.head.version;
        *request.headers_mut() = headers;
        request.extensions_mut().insert(ResumeAttempt {
            avoid: self.served_by.clone(),
        });
        Ok(Box::pin(self.inner.clone().oneshot(request)))
    }
}

/// The caller's body of a resumable stream.
pub(super) struct ResumingBody<S> {
    /// The body of the instance serving the stream now.
    current: Option<TonicBody>,
    /// A re-open under way.
    reopening: Option<BoxFuture<'static, Answer>>,
    /// The wait before the next re-open.
    backoff: Option<Pin<Box<Sleep>>>,
    stream: ResumedStream<S>,
}

impl<S> ResumingBody<S>
where
    S: ResumeInner,
{
    /// Carries out `after`: a re-open, a wait, or the end (`Some` trailers).
    fn follow(&mut self, after: AfterMove) -> Option<HeaderMap> {
        match after {
            AfterMove::Reopen => self.start_reopen(),
            AfterMove::Wait(wait) => {
                self.backoff = Some(Box::pin(tokio::time::sleep(wait)));
                None
            }
            AfterMove::End(trailers) => Some(trailers),
        }
    }

    fn start_reopen(&mut self) -> Option<HeaderMap> {
        match self.stream.reopen() {
            Ok(call) => {
                self.reopening = Some(call);
                None
            }
            Err(trailers) => Some(trailers),
        }
    }

    /// The re-open's answer: the body to go on with, or what ends the caller's stream.
    fn reopened(&mut self, answer: Answer) -> Option<HeaderMap> {
        let mut response = match answer {
            Ok(response) => response,
            Err(error) => return Some(self.stream.not_taken(error)),
        };
        self.stream.served_by = served_by(&mut response);
        if response.headers().contains_key(GRPC_STATUS) {
            // Trailers-only: moved at once, or failed.
            let (parts, _) = response.into_parts();
            if parts.headers.contains_key(STREAM_MOVED) {
                let after = self.stream.after_move(parts.headers);
                return self.follow(after);
            }
            self.stream.methods.note_not_resumed();
            return Some(parts.headers);
        }
        self.stream.awaiting_message = true;
        self.current = Some(response.into_body());
        None
    }
}

impl<S> Body for ResumingBody<S>
where
    S: ResumeInner,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            if let Some(wait) = &mut this.backoff {
                ready!(wait.as_mut().poll(cx));
                this.backoff = None;
                if let Some(trailers) = this.start_reopen() {
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
            }
            if let Some(call) = &mut this.reopening {
                let answer = ready!(call.as_mut().poll(cx));
                this.reopening = None;
                if let Some(trailers) = this.reopened(answer) {
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                continue;
            }
            let Some(body) = &mut this.current else {
                return Poll::Ready(None);
            };
            let frame = match ready!(Pin::new(body).poll_frame(cx)) {
                Some(Ok(frame)) => frame,
                other => return Poll::Ready(other),
            };
            if let Some(data) = frame.data_ref() {
                if std::mem::take(&mut this.stream.awaiting_message) {
                    this.stream.methods.note_resumed();
                }
                this.stream.messages.feed(data);
                return Poll::Ready(Some(Ok(frame)));
            }
            if !frame
                .trailers_ref()
                .is_some_and(|t| t.contains_key(STREAM_MOVED))
            {
                return Poll::Ready(Some(Ok(frame)));
            }
            this.current = None;
            let trailers = frame.into_trailers().unwrap_or_default();
            let after = this.stream.after_move(trailers);
            if let Some(trailers) = this.follow(after) {
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
        }
    }
}

/// `response` (a trailers-only answer) ending with `trailers` instead of its own status.
fn trailers_only(response: Response<TonicBody>, trailers: HeaderMap) -> Response<TonicBody> {
    let (mut parts, body) = response.into_parts();
    for name in trailers.keys() {
        parts.headers.remove(name);
    }
    parts.headers.extend(trailers);
    Response::from_parts(parts, body)
}

/// The wait before the re-open after the `n`th empty move in a row (n ≥ 1).
fn backoff(n: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << (n - 1).min(16))
        .min(LONGEST_BACKOFF)
}
