use super::testing::channel;
use super::*;
use crate::config::{BlacklistConfig, ReferenceConfig};

fn sent_timeout(request: &Request<TonicBody>) -> Duration {
    grpc_timeout(request.headers()).expect("every attempt says its deadline")
}

#[tokio::test(start_paused = true)]
async fn each_attempt_sends_what_remains_of_the_callers_deadline() {
    let config = ReferenceConfig {
        timeout: Some(Duration::from_secs(3)),
        ..ReferenceConfig::default()
    };
    let channel = channel(&[1], config, BlacklistConfig::default(), 1);
    let request = Request::builder()
        .uri("/t.S/M")
        .header(GRPC_TIMEOUT, "1S")
        .body(TonicBody::empty())
        .unwrap();
    let mut call = Call::new(channel.stack().clone(), request);
    let (first, wait) = call.request_with(TonicBody::empty(), None);
    assert_eq!(sent_timeout(&first), Duration::from_secs(1));
    assert_eq!(
        wait.timeout,
        Some(Duration::from_secs(1)),
        "the shorter bounds it"
    );
    tokio::time::advance(Duration::from_millis(300)).await;
    let (retry, wait) = call.request_with(TonicBody::empty(), None);
    assert_eq!(sent_timeout(&retry), Duration::from_millis(700));
    assert_eq!(wait.timeout, Some(Duration::from_millis(700)));
}

#[tokio::test(start_paused = true)]
async fn without_a_callers_deadline_nothing_is_sent_and_the_attempt_timeout_bounds() {
    let config = ReferenceConfig {
        timeout: Some(Duration::from_millis(250)),
        ..ReferenceConfig::default()
    };
    let channel = channel(&[1], config, BlacklistConfig::default(), 1);
    let mut call = super::testing::call(&channel);
    let (request, wait) = call.request_with(TonicBody::empty(), None);
    assert_eq!(
        grpc_timeout(request.headers()),
        None,
        "the reference's timeout bounds only the response head: a provider would cut a stream at it"
    );
    assert_eq!(wait.timeout, Some(Duration::from_millis(250)));
}

fn served_call_with(deadline_in: Duration) -> CallContext {
    CallContext::new().with_deadline(Instant::now() + deadline_in)
}

#[tokio::test(start_paused = true)]
async fn a_call_made_while_serving_one_sends_what_remains_of_the_served_deadline() {
    let channel = channel(
        &[1],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        1,
    );
    served_call_with(Duration::from_millis(300))
        .scope(async {
            tokio::time::advance(Duration::from_millis(200)).await;
            let mut call = super::testing::call(&channel);
            let (first, wait) = call.request_with(TonicBody::empty(), None);
            assert_eq!(sent_timeout(&first), Duration::from_millis(100));
            assert_eq!(
                wait.timeout,
                Some(Duration::from_millis(100)),
                "below the 3 s timeout"
            );
            tokio::time::advance(Duration::from_millis(40)).await;
            let (retry, _) = call.request_with(TonicBody::empty(), None);
            assert_eq!(sent_timeout(&retry), Duration::from_millis(60));
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn the_shorter_of_the_callers_own_timeout_and_the_inherited_one_is_sent() {
    let channel = channel(
        &[1],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        1,
    );
    served_call_with(Duration::from_secs(2))
        .scope(async {
            let request = Request::builder()
                .uri("/t.S/M")
                .header(GRPC_TIMEOUT, "50m")
                .body(TonicBody::empty())
                .unwrap();
            let mut call = Call::new(channel.stack().clone(), request);
            let (first, _) = call.request_with(TonicBody::empty(), None);
            assert_eq!(sent_timeout(&first), Duration::from_millis(50));
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_reference_that_does_not_inherit_sends_no_deadline() {
    let config = ReferenceConfig {
        inherit_deadline: false,
        ..ReferenceConfig::default()
    };
    let channel = channel(&[1], config, BlacklistConfig::default(), 1);
    served_call_with(Duration::from_millis(300))
        .scope(async {
            let mut call = super::testing::call(&channel);
            let (request, wait) = call.request_with(TonicBody::empty(), None);
            assert_eq!(grpc_timeout(request.headers()), None);
            assert_eq!(wait.timeout, Some(Duration::from_secs(3)));
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn with_no_time_left_the_call_fails_deadline_exceeded_without_an_attempt() {
    use tower_service::Service;
    let mut channel = channel(
        &[1],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        1,
    );
    let error = served_call_with(Duration::from_millis(10))
        .scope(async {
            tokio::time::advance(Duration::from_millis(20)).await;
            let request = Request::builder()
                .uri("/t.S/M")
                .body(TonicBody::empty())
                .unwrap();
            channel.call(request).await.expect_err("no time left")
        })
        .await;
    let status = error.downcast::<tonic::Status>().expect("a status");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    // Only the channel's check before any attempt says so; an attempt would have
    // dialled (nothing listens on port 1) and failed otherwise.
    assert_eq!(status.message(), rpc_core::metadata::NO_TIME_LEFT);
}

fn sent_trace(request: &Request<TonicBody>) -> TraceContext {
    TraceContext::from_headers(request.headers()).expect("every attempt carries traceparent")
}

#[tokio::test]
async fn attempts_continue_the_served_calls_trace_each_a_span_of_its_own() {
    let channel = channel(
        &[1],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        1,
    );
    let served = TraceContext::new_root().child();
    CallContext::new()
        .with_trace(served.clone())
        .scope(async {
            let mut call = super::testing::call(&channel);
            let (first, _) = call.request_with(TonicBody::empty(), None);
            let (retry, _) = call.request_with(TonicBody::empty(), None);
            let (first, retry) = (sent_trace(&first), sent_trace(&retry));
            assert_eq!(first.trace_id(), served.trace_id());
            assert_eq!(retry.trace_id(), served.trace_id());
            assert_ne!(first.span_id(), retry.span_id());
            assert_ne!(first.span_id(), served.span_id());
        })
        .await;
    // Outside a served call, with no exporter, a call is in no trace: it sends none.
    let (alone, _) = super::testing::call(&channel).request_with(TonicBody::empty(), None);
    assert_eq!(TraceContext::from_headers(alone.headers()), None);
}

#[tokio::test]
async fn a_traceparent_the_caller_wrote_is_sent_unchanged() {
    let channel = channel(
        &[1],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        1,
    );
    let own = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let request = Request::builder()
        .uri("/t.S/M")
        .header(TRACEPARENT, own)
        .body(TonicBody::empty())
        .unwrap();
    let mut call = Call::new(channel.stack().clone(), request);
    let (first, _) = call.request_with(TonicBody::empty(), None);
    let (retry, _) = call.request_with(TonicBody::empty(), None);
    assert_eq!(first.headers()[TRACEPARENT], own);
    assert_eq!(retry.headers()[TRACEPARENT], own);
}

#[test]
fn a_ready_stream_is_read_whole_for_forks_and_only_a_little_for_one_attempt_at_a_time() {
    let ready_stream = || {
        let frames = (0..3).map(|_| {
            Ok::<_, tonic::Status>(http_body::Frame::data(bytes::Bytes::from(vec![
                0u8;
                64 << 10
            ])))
        });
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        Request::builder()
            .uri("/t.S/M")
            .body(TonicBody::new(body))
            .unwrap()
    };
    for (cluster, whole) in [
        (crate::config::ClusterKind::Failover, false),
        (crate::config::ClusterKind::Forking, true),
        (crate::config::ClusterKind::Broadcast, true),
    ] {
        let config = ReferenceConfig {
            cluster,
            ..ReferenceConfig::default()
        };
        let channel = channel(&[1, 2], config, BlacklistConfig::default(), 1);
        let call = Call::new(channel.stack().clone(), ready_stream());
        assert_eq!(call.body.is_complete(), whole, "{cluster:?}");
    }
}
