//! The resume filter over a scripted inner service: each call answers with the next
//! script entry, and the requests it got are kept.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::BoxFuture;
use http::{HeaderMap, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use parking_lot::Mutex;
use rpc_core::{BoxError, InstanceId};
use tonic::body::Body as TonicBody;
use tower::{Layer, ServiceExt};
use tower_service::Service;

use super::*;

/// One scripted answer: the instance, the messages, and whether it ends moved (with
/// `resume-from`), or the trailers-only refusal when no message and not moved.
#[derive(Clone)]
struct Answer {
    instance: &'static str,
    messages: Vec<&'static [u8]>,
    moved_at: Option<u32>,
    /// The moved status in the response headers, no body (the handler returned it
    /// before its stream began).
    trailers_only: bool,
    /// No instance answers (the cluster's error).
    fail: bool,
}

/// A request as the scripted service got it: its headers, the instance it was told to
/// avoid, its body.
type Seen = (HeaderMap, Option<InstanceId>, Bytes);

/// A streaming answer of `instance`: `messages`, then moved (with `resume-from`) or OK.
fn answer(instance: &'static str, messages: Vec<&'static [u8]>, moved_at: Option<u32>) -> Answer {
    Answer {
        instance,
        messages,
        moved_at,
        trailers_only: false,
        fail: false,
    }
}

#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn framed(message: &[u8]) -> Bytes {
    let mut frame = BytesMut::new();
    frame.put_u8(0);
    frame.put_u32(message.len() as u32);
    frame.extend_from_slice(message);
    frame.freeze()
}

impl Service<Request<TonicBody>> for Scripted {
    type Response = Response<TonicBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<TonicBody>, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<TonicBody>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let avoid = request
                .extensions()
                .get::<ResumeAttempt>()
                .and_then(|attempt| attempt.avoid.clone());
            let (parts, body) = request.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            this.seen.lock().push((parts.headers, avoid, body));
            let answer = this.answers.lock().pop_front().expect("a scripted answer");
            if answer.fail {
                return Err(Box::new(tonic::Status::unavailable("no provider")) as BoxError);
            }
            let mut frames: Vec<Result<Frame<Bytes>, Infallible>> = answer
                .messages
                .iter()
                .map(|message| Ok(Frame::data(framed(message))))
                .collect();
            let mut trailers = HeaderMap::new();
            match answer.moved_at {
                Some(next) => {
                    let mut resume = tonic::metadata::MetadataMap::new();
                    resume.insert("resume-from", next.into());
                    let status = rpc_core::moved(resume);
                    status.add_header(&mut trailers).unwrap();
                    trailers.extend(status.metadata().clone().into_headers());
                }
                None => {
                    trailers.insert("grpc-status", "0".parse().unwrap());
                }
            }
            let mut response = if answer.trailers_only {
                let mut response = Response::new(TonicBody::empty());
                *response.headers_mut() = trailers;
                response
            } else {
                frames.push(Ok(Frame::trailers(trailers)));
                Response::new(TonicBody::new(StreamBody::new(futures_util::stream::iter(
                    frames,
                ))))
            };
            response
                .extensions_mut()
                .insert(ServedBy(InstanceId::new(answer.instance)));
            Ok(response)
        })
    }
}

fn counts(moved: u64, resumed: u64, not_resumed: u64) -> ResumeCounts {
    ResumeCounts {
        moved,
        resumed,
        not_resumed,
    }
}

fn methods() -> ResumableMethods {
    let methods = ResumableMethods::default();
    methods.insert("/feed.Feed/Subscribe", Arc::new(SameRequest));
    methods
}

fn subscribe(path: &str, timeout: Option<&str>) -> Request<TonicBody> {
    let mut request = Request::builder().uri(path);
    if let Some(timeout) = timeout {
        request = request.header("grpc-timeout", timeout);
    }
    request
        .body(TonicBody::new(http_body_util::Full::new(framed(b"req"))))
        .unwrap()
}

/// The caller's messages (unframed) and the trailers that ended its stream.
async fn read_all(response: Response<TonicBody>) -> (Vec<Bytes>, HeaderMap) {
    let mut body = response.into_body();
    let mut data = BytesMut::new();
    let mut trailers = HeaderMap::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        match frame.into_data() {
            Ok(bytes) => data.extend_from_slice(&bytes),
            Err(frame) => trailers = frame.into_trailers().unwrap(),
        }
    }
    let mut messages = Vec::new();
    let mut data = data.freeze();
    while data.len() >= 5 {
        let length = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
        messages.push(data.slice(5..5 + length));
        data = data.slice(5 + length..);
    }
    (messages, trailers)
}

#[tokio::test(start_paused = true)]
async fn a_moved_stream_goes_on_elsewhere_with_the_trailers_as_metadata() {
    let inner = Scripted::default();
    inner.answers.lock().extend([
        answer("a", vec![b"0", b"1"], Some(2)),
        answer("b", vec![b"2", b"3"], None),
    ]);
    let methods = methods();
    let service = StreamResumeLayer::new(methods.clone()).layer(inner.clone());
    let response = service
        .oneshot(subscribe("/feed.Feed/Subscribe", None))
        .await
        .unwrap();
    let (messages, trailers) = read_all(response).await;
    assert_eq!(messages, ["0", "1", "2", "3"]);
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    let seen = inner.seen.lock();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].1, None, "the first call avoids nothing");
    assert_eq!(
        seen[1].1,
        Some(InstanceId::new("a")),
        "the re-open avoids the mover"
    );
    assert_eq!(seen[1].0.get("resume-from").unwrap(), "2");
    assert!(seen[1].0.get("rpc-stream-moved").is_none());
    assert_eq!(seen[1].2, framed(b"req"), "the same request again");
    assert_eq!(methods.counts(), counts(1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_keeps_moving_at_once_ends_moved_after_the_bound_with_backoff() {
    let inner = Scripted::default();
    let first = answer("a", vec![b"0"], Some(1));
    let empty = answer("a", vec![], Some(1));
    inner.answers.lock().push_back(first);
    for _ in 0..=MAX_EMPTY_MOVES {
        inner.answers.lock().push_back(empty.clone());
    }
    let methods = methods();
    let service = StreamResumeLayer::new(methods.clone()).layer(inner.clone());
    let started = tokio::time::Instant::now();
    let response = service
        .oneshot(subscribe("/feed.Feed/Subscribe", None))
        .await
        .unwrap();
    let (messages, trailers) = read_all(response).await;
    assert_eq!(messages, ["0"]);
    assert_eq!(trailers.get("grpc-status").unwrap(), "14");
    assert_eq!(trailers.get("rpc-stream-moved").unwrap(), "1");
    // The first call, its re-open at once (a message had come), then one re-open after
    // each of MAX_EMPTY_MOVES empty moves; the next empty move ends it.
    assert_eq!(inner.seen.lock().len(), 2 + MAX_EMPTY_MOVES as usize);
    // 25 + 50 + 100 + 200 + 400 + 800 + 1000 + 1000 ms before those re-opens.
    assert_eq!(started.elapsed(), Duration::from_millis(3575));
    let counts = methods.counts();
    assert_eq!(
        (counts.moved, counts.not_resumed),
        (u64::from(MAX_EMPTY_MOVES) + 2, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn the_callers_deadline_bounds_the_whole_stream() {
    let inner = Scripted::default();
    inner
        .answers
        .lock()
        .extend([answer("a", vec![], Some(0)), answer("a", vec![b"0"], None)]);
    let service = StreamResumeLayer::new(methods()).layer(inner.clone());
    let response = service
        .oneshot(subscribe("/feed.Feed/Subscribe", Some("10m")))
        .await
        .unwrap();
    let (messages, trailers) = read_all(response).await;
    assert!(messages.is_empty());
    assert_eq!(trailers.get("grpc-status").unwrap(), "4", "{trailers:?}");
}

#[tokio::test(start_paused = true)]
async fn a_method_not_declared_resumable_is_passed_through() {
    let inner = Scripted::default();
    inner
        .answers
        .lock()
        .push_back(answer("a", vec![b"0"], Some(1)));
    let methods = methods();
    let service = StreamResumeLayer::new(methods.clone()).layer(inner.clone());
    let response = service
        .oneshot(subscribe("/feed.Feed/Other", None))
        .await
        .unwrap();
    let (messages, trailers) = read_all(response).await;
    assert_eq!(messages, ["0"]);
    assert_eq!(trailers.get("rpc-stream-moved").unwrap(), "1");
    assert_eq!(methods.counts(), ResumeCounts::default());
}

#[test]
fn a_typed_rule_derives_the_next_request_from_the_last_message() {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Req {
        #[prost(uint64, tag = "1")]
        from: u64,
    }
    let rule = typed(
        |request: &Req, last: Option<&Req>, _: &tonic::metadata::MetadataMap| {
            Some(Req {
                from: last.map_or(request.from, |last| last.from + 1),
            })
        },
    );
    let request = Bytes::from(prost::Message::encode_to_vec(&Req { from: 5 }));
    let last = Bytes::from(prost::Message::encode_to_vec(&Req { from: 9 }));
    let trailers = tonic::metadata::MetadataMap::new();
    let moved = MovedStream {
        request: &request,
        last_message: Some(&last),
        delivered: 5,
        trailers: &trailers,
    };
    let next = rule.resume(&moved).unwrap();
    assert_eq!(
        <Req as prost::Message>::decode(next).unwrap(),
        Req { from: 10 }
    );
    let garbage = Bytes::from_static(b"\xff\xff");
    let bad = MovedStream {
        request: &garbage,
        last_message: None,
        delivered: 0,
        trailers: &trailers,
    };
    assert!(rule.resume(&bad).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_stream_moved_before_it_began_is_reopened_before_the_caller_gets_headers() {
    let inner = Scripted::default();
    inner.answers.lock().extend([
        Answer {
            instance: "a",
            messages: vec![],
            moved_at: Some(0),
            trailers_only: true,
            fail: false,
        },
        answer("b", vec![b"0", b"1"], None),
    ]);
    let methods = methods();
    let service = StreamResumeLayer::new(methods.clone()).layer(inner.clone());
    let response = service
        .oneshot(subscribe("/feed.Feed/Subscribe", None))
        .await
        .unwrap();
    assert!(
        response.headers().get("grpc-status").is_none(),
        "headers of the stream that went on"
    );
    let (messages, trailers) = read_all(response).await;
    assert_eq!(messages, ["0", "1"]);
    assert_eq!(trailers.get("grpc-status").unwrap(), "0");
    assert_eq!(inner.seen.lock()[1].1, Some(InstanceId::new("a")));
    assert_eq!(methods.counts(), counts(1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_stream_no_instance_takes_on_ends_with_the_moved_status() {
    let inner = Scripted::default();
    inner.answers.lock().extend([
        answer("a", vec![b"0"], Some(1)),
        Answer {
            instance: "a",
            messages: vec![],
            moved_at: None,
            trailers_only: false,
            fail: true,
        },
    ]);
    let methods = methods();
    let service = StreamResumeLayer::new(methods.clone()).layer(inner.clone());
    let response = service
        .oneshot(subscribe("/feed.Feed/Subscribe", None))
        .await
        .unwrap();
    let (messages, trailers) = read_all(response).await;
    assert_eq!(messages, ["0"]);
    assert_eq!(trailers.get("grpc-status").unwrap(), "14");
    assert_eq!(
        trailers.get("rpc-stream-moved").unwrap(),
        "1",
        "the caller can follow the rule"
    );
    assert_eq!(trailers.get("resume-from").unwrap(), "1");
    assert_eq!(methods.counts(), counts(1, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_request_of_several_messages_is_a_stream_and_passes_through() {
    let inner = Scripted::default();
    inner
        .answers
        .lock()
        .push_back(answer("a", vec![b"0"], Some(1)));
    let methods = methods();
    let service = StreamResumeLayer::new(methods.clone()).layer(inner.clone());
    let mut two = BytesMut::new();
    two.extend_from_slice(&framed(b"one"));
    two.extend_from_slice(&framed(b"two"));
    let request = Request::builder()
        .uri("/feed.Feed/Subscribe")
        .body(TonicBody::new(http_body_util::Full::new(two.freeze())))
        .unwrap();
    let response = service.oneshot(request).await.unwrap();
    let (_, trailers) = read_all(response).await;
    assert_eq!(
        trailers.get("rpc-stream-moved").unwrap(),
        "1",
        "not re-opened"
    );
    assert_eq!(inner.seen.lock().len(), 1);
    assert_eq!(methods.counts(), ResumeCounts::default());
}
