//! A swallowed failure (the failsafe and failback strategies): the caller gets an empty
//! OK response, and a failback call goes to the background queue to be retried.

use futures_util::future::BoxFuture;
use http::Response;
use tonic::body::Body as TonicBody;

use super::Call;
use super::pick::Route;
use crate::classify::{Failure, Outcome};
use crate::failback_queue::{Retried, RetryJob};

/// Answers a failed call with an empty OK response; with `retry_later`, queues it for
/// background retries (routed by `route`) if its body can be sent again.
pub(super) fn swallow(
    call: Call,
    failure: Option<Failure>,
    retry_later: bool,
    route: Route,
) -> Response<TonicBody> {
    let stack = call.stack.clone();
    let then = if retry_later {
        "will retry in the background"
    } else {
        "answering with an empty response"
    };
    match failure {
        Some(failure) => {
            tracing::warn!(service = %stack.directory.service(), cluster = ?stack.config.cluster, kind = ?failure.kind, "call failed; {then}");
        }
        None => {
            tracing::warn!(service = %stack.directory.service(), cluster = ?stack.config.cluster, "no provider; {then}");
        }
    }
    stack.stats.note_swallowed();
    if retry_later && call.body.replayable() {
        stack.failback.enqueue(FailbackRetry { call, route });
    }
    empty_response()
}

/// A failed call waiting in the failback queue.
struct FailbackRetry {
    call: Call,
    route: Route,
}

impl RetryJob for FailbackRetry {
    fn retry(&mut self) -> BoxFuture<'_, Retried> {
        Box::pin(async move {
            self.call.forget_tried();
            match self.call.send(self.route).await {
                Some(Outcome::Success(_) | Outcome::AppError(_)) => Retried::Done,
                _ if !self.call.body.replayable() => Retried::Spent,
                _ => Retried::Failed,
            }
        })
    }
}

/// A successful gRPC response carrying one empty message (every field at its default)
/// and status OK: what failsafe and failback give the caller instead of an error.
fn empty_response() -> Response<TonicBody> {
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::StreamBody;

    // One length-prefixed message frame: not compressed, length 0.
    let message = Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]));
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames = futures_util::stream::iter([
        Ok::<_, std::convert::Infallible>(message),
        Ok(Frame::trailers(trailers)),
    ]);
    let mut response = Response::new(TonicBody::new(StreamBody::new(frames)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}
