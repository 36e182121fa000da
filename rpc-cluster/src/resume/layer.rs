//! The filter that makes resumable methods' streams continue across instances.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use pin_project_lite::pin_project;
use rpc_core::BoxError;
use tonic::body::Body as TonicBody;
use tower::Layer;
use tower_service::Service;

use super::body::ResumedStream;
use super::request_head::RequestHead;
use super::rules::ResumableMethods;
use super::{ResumeAttempt, ResumeInner};

/// Applies [`StreamResume`] to a reference's channel.
#[derive(Clone, Debug)]
pub struct StreamResumeLayer {
    methods: ResumableMethods,
}

impl StreamResumeLayer {
    /// A layer resuming the streams of `methods`.
    pub fn new(methods: ResumableMethods) -> Self {
        Self { methods }
    }
}

impl<S> Layer<S> for StreamResumeLayer {
    type Service = StreamResume<S>;

    fn layer(&self, inner: S) -> Self::Service {
        StreamResume {
            inner,
            methods: self.methods.clone(),
        }
    }
}

/// A reference's channel whose resumable methods' streams are re-opened elsewhere when
/// their provider moves them (see the module docs). Calls of other methods pass through
/// as they are.
#[derive(Clone, Debug)]
pub struct StreamResume<S> {
    inner: S,
    methods: ResumableMethods,
}

impl<S> Service<Request<TonicBody>> for StreamResume<S>
where
    S: ResumeInner,
{
    type Response = Response<TonicBody>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<TonicBody>) -> Self::Future {
        let Some(rule) = self.methods.get(request.uri().path()) else {
            return ResponseFuture::Direct {
                inner: self.inner.call(request),
            };
        };
        let (mut parts, body) = request.into_parts();
        let (read, rest) = read_ready(body);
        if rest.is_some() || !is_one_message(&read) {
            // A client or bidirectional stream (not all here yet, or more than one
            // message): sent as it is.
            tracing::debug!(path = %parts.uri.path(), "a resumable method's request is a stream: sent as it is, not resumable");
            let body = match rest {
                Some(rest) => prefixed(read, rest),
                None => TonicBody::new(Full::new(read)),
            };
            return ResponseFuture::Direct {
                inner: self.inner.call(Request::from_parts(parts, body)),
            };
        }
        // The whole request is here: the stream can be re-opened with it.
        let head = RequestHead::of(&parts);
        parts.extensions.insert(ResumeAttempt::default());
        let call = self.inner.call(Request::from_parts(
            parts,
            TonicBody::new(Full::new(read.clone())),
        ));
        let stream = ResumedStream::new(self.inner.clone(), self.methods.clone(), rule, head, read);
        ResponseFuture::Resuming {
            call: Box::pin(async move {
                let response = call.await?;
                stream.answer(response).await
            }),
        }
    }
}

/// What `body` has ready now (all of it for a server-streaming call's one message), and
/// the rest of it if it has not ended.
fn read_ready(mut body: TonicBody) -> (Bytes, Option<TonicBody>) {
    let mut read = BytesMut::new();
    loop {
        match body.frame().now_or_never() {
            Some(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    read.extend_from_slice(&data);
                }
            }
            Some(None) => return (read.freeze(), None),
            Some(Some(Err(status))) => {
                let failed = futures_util::stream::iter([Err(status)]);
                return (read.freeze(), Some(TonicBody::new(StreamBody::new(failed))));
            }
            None => return (read.freeze(), Some(body)),
        }
    }
}

/// Whether `read` is exactly one gRPC message (a server-streaming call's request).
fn is_one_message(read: &Bytes) -> bool {
    read.len() >= 5
        && u32::from_be_bytes([read[1], read[2], read[3], read[4]]) as usize == read.len() - 5
}

/// `read` followed by `rest`.
fn prefixed(read: Bytes, rest: TonicBody) -> TonicBody {
    use futures_util::StreamExt;
    let first = (!read.is_empty()).then(|| Ok(Frame::data(read)));
    let frames = futures_util::stream::iter(first).chain(BodyStream::new(rest));
    TonicBody::new(StreamBody::new(frames))
}

pin_project! {
    /// The response future of [`StreamResume`].
    #[project = Projection]
    pub enum ResponseFuture<F> {
        /// A call of a method that is not resumable, or whose request is a stream.
        Direct {
            #[pin]
            inner: F,
        },
        /// A resumable call: its response body re-opens the stream when it moves.
        Resuming {
            call: BoxFuture<'static, Result<Response<TonicBody>, BoxError>>,
        },
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<TonicBody>, BoxError>>,
{
    type Output = Result<Response<TonicBody>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projection::Direct { inner } => inner.poll(cx),
            Projection::Resuming { call } => call.as_mut().poll(cx),
        }
    }
}
