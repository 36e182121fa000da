use std::convert::Infallible;

use futures_util::{StreamExt, stream};
use http::HeaderMap;
use http_body_util::{BodyExt, StreamBody};
use tower::{ServiceExt, service_fn};

use super::*;

type TestBody = StreamBody<stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// A handler that answers at once with one message and then never ends.
fn streaming_handler() -> impl Service<
    Request<()>,
    Response = Response<TestBody>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<TestBody>, Infallible>>,
> + Clone {
    service_fn(|_request: Request<()>| async {
        let frames = stream::iter([Ok(Frame::data(Bytes::from_static(b"m")))])
            .chain(stream::pending())
            .boxed();
        Ok::<_, Infallible>(Response::new(StreamBody::new(frames)))
    })
}

fn request(timeout: Option<&str>) -> Request<()> {
    let mut request = Request::new(());
    request
        .headers_mut()
        .insert("content-type", "application/grpc".parse().unwrap());
    if let Some(timeout) = timeout {
        request
            .headers_mut()
            .insert("grpc-timeout", timeout.parse().unwrap());
    }
    request
}

async fn trailers_after_first_message(response: Response<ServedBody<TestBody>>) -> HeaderMap {
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "m");
    let trailers = body
        .frame()
        .await
        .unwrap()
        .unwrap()
        .into_trailers()
        .unwrap();
    assert!(body.frame().await.is_none());
    trailers
}

#[tokio::test(start_paused = true)]
async fn a_stream_past_its_deadline_ends_with_deadline_exceeded() {
    let cut = Arc::new(ShutdownCut::default());
    let service = CallBounds::new(streaming_handler(), cut);
    let response = service.oneshot(request(Some("200m"))).await.unwrap();
    let trailers = trailers_after_first_message(response).await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "4");
}

#[tokio::test(start_paused = true)]
async fn a_stream_open_at_the_cut_ends_with_unavailable_and_is_counted() {
    let cut = Arc::new(ShutdownCut::default());
    let service = CallBounds::new(streaming_handler(), cut.clone());
    let response = service.oneshot(request(None)).await.unwrap();
    let at_bound = cut.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        at_bound.cut();
    });
    let trailers = trailers_after_first_message(response).await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "14");
    let message = trailers.get("grpc-message").unwrap().to_str().unwrap();
    assert_eq!(
        message,
        "provider%20shut%20down%20before%20the%20stream%20ended"
    );
    assert_eq!(cut.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_handler_still_running_at_its_deadline_is_cancelled() {
    let cut = Arc::new(ShutdownCut::default());
    let never = service_fn(|_request: Request<()>| {
        std::future::pending::<Result<Response<TestBody>, Infallible>>()
    });
    let response = CallBounds::new(never, cut)
        .oneshot(request(Some("1S")))
        .await
        .unwrap();
    assert_eq!(response.headers().get("grpc-status").unwrap(), "4");
    assert!(response.into_body().frame().await.is_none());
}

#[tokio::test]
async fn tonics_size_limit_answer_leaves_as_resource_exhausted() {
    let cut = Arc::new(ShutdownCut::default());
    // What a generated server answers to a request over its own decoding limit: a
    // trailers-only OUT_OF_RANGE, its body tonic's empty one.
    let handler = service_fn(|_request: Request<()>| {
        let status = Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes, the limit is: 4 bytes",
        );
        std::future::ready(Ok::<_, Infallible>(status.into_http::<tonic::body::Body>()))
    });
    let response = CallBounds::new(handler, cut)
        .oneshot(request(None))
        .await
        .unwrap();
    assert_eq!(response.headers().get("grpc-status").unwrap(), "8");
}

#[tokio::test]
async fn a_malformed_grpc_timeout_is_answered_internal_without_running() {
    let cut = Arc::new(ShutdownCut::default());
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    let handler = service_fn(move |_request: Request<()>| {
        flag.store(true, Ordering::SeqCst);
        std::future::ready(Ok::<_, Infallible>(Response::new(http_body_util::Empty::<
            Bytes,
        >::new())))
    });
    let response = CallBounds::new(handler, cut)
        .oneshot(request(Some("soon")))
        .await
        .unwrap();
    assert_eq!(response.headers().get("grpc-status").unwrap(), "13");
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_call_with_no_time_left_is_answered_deadline_exceeded_without_running() {
    let cut = Arc::new(ShutdownCut::default());
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    let handler = service_fn(move |_request: Request<()>| {
        flag.store(true, Ordering::SeqCst);
        std::future::ready(Ok::<_, Infallible>(Response::new(http_body_util::Empty::<
            Bytes,
        >::new())))
    });
    let response = CallBounds::new(handler, cut)
        .oneshot(request(Some("0m")))
        .await
        .unwrap();
    assert_eq!(response.headers().get("grpc-status").unwrap(), "4");
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn the_handler_runs_in_a_call_context_holding_the_callers_deadline() {
    let cut = Arc::new(ShutdownCut::default());
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let record = seen.clone();
    let handler = service_fn(move |_request: Request<()>| {
        let record = record.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            record
                .lock()
                .push(CallContext::current().map(|served| served.remaining()));
            Ok::<_, Infallible>(Response::new(http_body_util::Empty::<Bytes>::new()))
        }
    });
    let mut service = CallBounds::new(handler, cut);
    service
        .ready()
        .await
        .unwrap()
        .call(request(Some("300m")))
        .await
        .unwrap();
    service
        .ready()
        .await
        .unwrap()
        .call(request(None))
        .await
        .unwrap();
    assert_eq!(
        *seen.lock(),
        [Some(Some(Duration::from_millis(100))), Some(None)],
        "300 ms less the 200 ms the handler took; no deadline without grpc-timeout"
    );
}

#[tokio::test]
async fn the_handler_continues_the_callers_trace_or_starts_one() {
    let cut = Arc::new(ShutdownCut::default());
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let record = seen.clone();
    let handler = service_fn(move |request: Request<()>| {
        let record = record.clone();
        async move {
            // The handler's future runs inside the context.
            let in_extensions = request.extensions().get::<CallContext>().cloned();
            let current = CallContext::current();
            assert_eq!(
                in_extensions, current,
                "the filters see what the handler sees"
            );
            record
                .lock()
                .push(current.and_then(|served| served.trace().cloned()));
            Ok::<_, Infallible>(Response::new(http_body_util::Empty::<Bytes>::new()))
        }
    });
    let mut service = CallBounds::new(handler, cut);
    let mut traced = request(None);
    traced.headers_mut().insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    service.ready().await.unwrap().call(traced).await.unwrap();
    service
        .ready()
        .await
        .unwrap()
        .call(request(None))
        .await
        .unwrap();
    let seen = seen.lock();
    let continued = seen[0].as_ref().expect("a trace");
    assert_eq!(
        continued.trace_id_hex().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(continued.parent_span_id(), Some(0x00f0_67aa_0ba9_02b7));
    let started = seen[1].as_ref().expect("a trace of its own");
    assert_ne!(started.trace_id(), continued.trace_id());
    assert_eq!(started.parent_span_id(), None);
}

/// A stream polled again and again by its task (a message every 50 ms) is ended at its
/// deadline all the same: between messages its bounds are checked, not polled again,
/// and a check must still see the deadline and the cut.
#[tokio::test(start_paused = true)]
async fn a_stream_polled_at_every_message_ends_at_its_deadline_or_the_cut() {
    for by_cut in [false, true] {
        let cut = Arc::new(ShutdownCut::default());
        let ticking = service_fn(|_request: Request<()>| async {
            let frames = stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some((Ok(Frame::data(Bytes::from_static(b"m"))), ()))
            })
            .boxed();
            Ok::<_, Infallible>(Response::new(StreamBody::new(frames) as TestBody))
        });
        let service = CallBounds::new(ticking, cut.clone());
        let timeout = if by_cut { None } else { Some("230m") };
        let response = service.oneshot(request(timeout)).await.unwrap();
        if by_cut {
            let at_bound = cut.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(230)).await;
                at_bound.cut();
            });
        }
        let mut body = response.into_body();
        let mut messages = 0;
        let trailers = loop {
            let frame = body.frame().await.unwrap().unwrap();
            match frame.into_data() {
                Ok(_) => {
                    messages += 1;
                    assert!(messages <= 10, "the bound was not seen; cut: {by_cut}");
                }
                Err(frame) => break frame.into_trailers().unwrap(),
            }
        };
        let expected = if by_cut { "14" } else { "4" };
        assert_eq!(
            trailers.get("grpc-status").unwrap(),
            expected,
            "cut: {by_cut}"
        );
        assert_eq!(
            messages, 4,
            "messages at 50, 100, 150, 200 ms; cut: {by_cut}"
        );
        assert_eq!(cut.calls(), usize::from(by_cut));
    }
}
