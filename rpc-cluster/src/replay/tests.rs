use super::*;
use futures_util::StreamExt as _;
use futures_util::stream;
use http_body_util::{BodyExt, StreamBody};

async fn collect(body: TonicBody) -> Vec<u8> {
    body.collect().await.unwrap().to_bytes().to_vec()
}

#[tokio::test]
async fn a_complete_body_is_replayed_to_every_attempt() {
    let body = RequestBody::capture(
        TonicBody::new(http_body_util::Full::new(Bytes::from("abc"))),
        1024,
        1024,
    );
    assert!(body.replayable());
    for _ in 0..3 {
        let attempt = body.attempt().unwrap().0;
        assert_eq!(collect(attempt).await, b"abc");
    }
}

#[tokio::test]
async fn a_stream_sent_in_part_goes_to_no_other_attempt_until_its_caller_finishes_it() {
    let (tx, caller) = written_by_caller();
    tx.send(Ok(Frame::data(Bytes::from("a")))).await.unwrap();
    let body = RequestBody::capture(caller, 1024, 1024);
    assert!(body.replayable());
    let first = body.attempt().unwrap().0;
    drop(first);
    assert!(body.replayable(), "untouched: another attempt may have it");
    let mut second = body.attempt().unwrap().0;
    assert_eq!(data_of(second.frame().await), &b"a"[..]);
    assert!(
        !body.replayable(),
        "half sent, the rest still to be written: no other attempt"
    );
    assert!(body.attempt().is_none());
    assert!(!body.is_complete());
    tx.send(Ok(Frame::data(Bytes::from("b")))).await.unwrap();
    drop(tx);
    assert_eq!(data_of(second.frame().await), &b"b"[..]);
    assert!(second.frame().await.is_none(), "the end");
    assert!(
        body.replayable(),
        "finished and kept whole: as a unary request"
    );
    assert!(body.is_complete());
    assert_eq!(collect(body.attempt().unwrap().0).await, b"ab");
}

#[tokio::test]
async fn a_stream_its_caller_finished_ahead_of_what_was_sent_goes_again_whole() {
    let (tx, caller) = written_by_caller();
    let body = RequestBody::capture(caller, 1024, 1024);
    let mut first = body.attempt().unwrap().0;
    tx.send(Ok(Frame::data(Bytes::from("a")))).await.unwrap();
    assert_eq!(data_of(first.frame().await), &b"a"[..]);
    // The caller writes the rest and finishes while the first attempt is refused.
    tx.send(Ok(Frame::data(Bytes::from("b")))).await.unwrap();
    drop(tx);
    assert!(body.replayable(), "the rest was ready: the body is whole");
    let second = body.attempt().unwrap().0;
    assert!(
        first.frame().await.unwrap().is_err(),
        "the older attempt is fenced off"
    );
    assert_eq!(collect(second).await, b"ab");
}

#[tokio::test]
async fn a_stream_polled_with_nothing_to_send_can_still_go_elsewhere() {
    let (tx, caller) = written_by_caller();
    let body = RequestBody::capture(caller, 1024, 1024);
    let mut first = body.attempt().unwrap().0;
    // Polled right after the headers, as HTTP/2 clients do: nothing to send yet.
    assert!(futures_util::poll!(first.frame()).is_pending());
    assert!(
        body.replayable(),
        "nothing of it left: another attempt may have it"
    );
    // The call moves on (the first attempt was refused); the first attempt, still
    // alive in its connection task, can no longer take the message that comes now.
    let second = body.attempt().unwrap().0;
    tx.send(Ok(Frame::data(Bytes::from("m")))).await.unwrap();
    let stale = first.frame().await.unwrap();
    assert!(stale.is_err(), "the older attempt is fenced off");
    drop(tx);
    assert_eq!(collect(second).await, b"m");
}

#[tokio::test]
async fn a_body_over_the_limit_goes_to_one_attempt_whole() {
    let frames =
        stream::iter((0..4).map(|_| Ok::<_, Status>(Frame::data(Bytes::from(vec![0u8; 10])))));
    let body = RequestBody::capture(TonicBody::new(StreamBody::new(frames)), 15, 15);
    assert!(matches!(body, RequestBody::Streaming(_)));
    let attempt = body.attempt().unwrap().0;
    assert_eq!(collect(attempt).await.len(), 40, "nothing lost");
    assert!(!body.replayable(), "sent and not kept");
    assert!(!body.is_complete());
}

#[tokio::test]
async fn a_stream_that_outgrows_the_limit_while_sent_is_let_go_and_sent_on_whole() {
    let (tx, caller) = written_by_caller();
    let body = RequestBody::capture(caller, 25, 25);
    let mut first = body.attempt().unwrap().0;
    for _ in 0..2 {
        tx.send(Ok(Frame::data(Bytes::from(vec![1u8; 10]))))
            .await
            .unwrap();
        assert_eq!(data_of(first.frame().await).len(), 10);
    }
    tx.send(Ok(Frame::data(Bytes::from(vec![1u8; 10]))))
        .await
        .unwrap();
    assert_eq!(
        data_of(first.frame().await).len(),
        10,
        "the frame past the limit"
    );
    tx.send(Ok(Frame::data(Bytes::from(vec![1u8; 10]))))
        .await
        .unwrap();
    drop(tx);
    assert!(!body.replayable(), "30 bytes sent, 25 kept at most");
    assert_eq!(collect(first).await.len(), 10, "the rest goes on");
}

#[tokio::test]
async fn a_ready_stream_is_read_ahead_only_a_little_before_it_is_sent() {
    let pulled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = pulled.clone();
    let frames = stream::iter(0..100).map(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok::<_, Status>(Frame::data(Bytes::from(vec![0u8; 64 * 1024])))
    });
    let body = RequestBody::capture(TonicBody::new(StreamBody::new(frames)), 4 << 20, 256 << 10);
    assert_eq!(
        pulled.load(std::sync::atomic::Ordering::Relaxed),
        3,
        "up to 64 KiB, the frame past it and one more, of 100"
    );
    assert!(!body.is_complete());
    let attempt = body.attempt().unwrap().0;
    assert_eq!(
        collect(attempt).await.len(),
        100 * 64 * 1024,
        "nothing lost"
    );
    assert!(!body.replayable(), "6.4 MB sent, 256 KiB kept at most");
}

#[tokio::test]
async fn a_unary_request_past_the_read_ahead_is_complete() {
    let body = RequestBody::capture(
        TonicBody::new(http_body_util::Full::new(Bytes::from(vec![7u8; 1 << 20]))),
        4 << 20,
        4 << 20,
    );
    assert!(matches!(body, RequestBody::Buffered { .. }));
    assert!(body.is_complete());
}

#[tokio::test]
async fn a_stream_is_kept_up_to_its_own_limit_and_a_complete_body_up_to_the_whole_limit() {
    let whole = RequestBody::capture(
        TonicBody::new(http_body_util::Full::new(Bytes::from(vec![0u8; 20]))),
        1024,
        15,
    );
    assert!(
        matches!(whole, RequestBody::Buffered { .. }),
        "complete at the start"
    );
    let (tx, caller) = written_by_caller();
    let stream = RequestBody::capture(caller, 1024, 15);
    let attempt = stream.attempt().unwrap().0;
    for _ in 0..2 {
        tx.send(Ok(Frame::data(Bytes::from(vec![0u8; 10]))))
            .await
            .unwrap();
    }
    drop(tx);
    assert_eq!(collect(attempt).await.len(), 20, "nothing lost");
    assert!(!stream.replayable(), "20 bytes sent, 15 kept at most");
}

#[tokio::test]
async fn a_stream_whose_call_ended_is_sent_on_whole_by_its_attempt() {
    let (tx, caller) = written_by_caller();
    tx.send(Ok(Frame::data(Bytes::from("a")))).await.unwrap();
    let body = RequestBody::capture(caller, 1024, 1024);
    let mut attempt = body.attempt().unwrap().0;
    assert_eq!(data_of(attempt.frame().await), &b"a"[..]);
    tx.send(Ok(Frame::data(Bytes::from("b")))).await.unwrap();
    // The call was answered (a bidirectional stream's answer comes early): only the
    // attempt holds the body now.
    drop(body);
    tx.send(Ok(Frame::data(Bytes::from("c")))).await.unwrap();
    drop(tx);
    assert_eq!(collect(attempt).await, b"bc");
}

fn data_of(frame: Option<Result<Frame<Bytes>, Status>>) -> Bytes {
    frame
        .expect("a frame")
        .expect("not an error")
        .into_data()
        .expect("data")
}

/// A request body its caller writes as the test goes: the sender of its frames, and
/// the body.
fn written_by_caller() -> (
    tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Status>>,
    TonicBody,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    (tx, TonicBody::new(StreamBody::new(tokio_stream_from(rx))))
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    stream::poll_fn(move |cx| rx.poll_recv(cx))
}
