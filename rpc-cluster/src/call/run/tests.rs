//! The plans: every fork started before an answer is taken, and a seed's choices alike.

use super::super::testing::{call, channel};
use super::*;
use crate::config::{BlacklistConfig, ReferenceConfig};

/// The instances picked and the backoffs drawn by `calls` calls on a channel seeded
/// with `seed`, one pick and one failover decision per call.
fn choices(seed: u64, calls: usize) -> Vec<(String, Decision)> {
    let channel = channel(
        &[1, 2, 3, 4, 5, 6],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        seed,
    );
    (0..calls)
        .map(|_| {
            let mut call = call(&channel);
            let picked = call.pick(Route::Balanced).unwrap().id().to_string();
            call.attempts = 1;
            let decision = call.decide(Failed::Attempt(FailureKind::NotSent));
            (picked, decision)
        })
        .collect()
}

#[tokio::test]
async fn every_fork_is_started_even_when_the_first_answers_in_its_first_poll() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let started = AtomicBool::new(false);
    let forks: Vec<BoxFuture<'_, u8>> = vec![
        Box::pin(async { 1 }),
        Box::pin(async {
            started.store(true, Ordering::SeqCst);
            std::future::pending().await
        }),
    ];
    let mut outcomes = start_each(forks).await;
    assert_eq!(outcomes.next().await, Some(1));
    assert!(
        started.load(Ordering::SeqCst),
        "the second fork was started before the first answer was taken"
    );
}

#[tokio::test(start_paused = true)]
async fn a_seed_makes_two_channels_choose_alike_backoffs_included() {
    let first = choices(42, 40);
    assert_eq!(first, choices(42, 40));
    assert!(
        first
            .iter()
            .all(|(_, decision)| matches!(decision, Decision::Retry { .. }))
    );
    assert!(
        first.iter().any(|(_, decision)| *decision != first[0].1),
        "backoffs are drawn, not fixed"
    );
    assert!(
        first.iter().any(|(id, _)| *id != first[0].0),
        "picks are spread"
    );
    assert_ne!(first, choices(43, 40), "another seed, other choices");
}

#[tokio::test]
async fn a_stream_that_cannot_be_sent_again_fails_with_its_refusal_not_no_provider() {
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::BodyExt;

    let channel = channel(
        &[1, 2],
        ReferenceConfig::default(),
        BlacklistConfig::default(),
        7,
    );
    let mut call = call(&channel);
    let frames = futures_util::stream::iter([Ok::<_, tonic::Status>(Frame::data(Bytes::from(
        vec![0u8; 512 << 10],
    )))])
    .chain(futures_util::stream::pending());
    call.body = crate::replay::RequestBody::capture(
        TonicBody::new(http_body_util::StreamBody::new(frames)),
        4 << 20,
        256 << 10,
    );
    let (mut sent, _) = call.body.attempt().expect("a first attempt");
    sent.frame().await.expect("a frame").expect("data");
    call.last_failure = Some(Failure::error(
        FailureKind::Rejected,
        tonic::Status::unavailable("provider is shutting down; request not executed"),
    ));
    let status = match call.no_attempt_left() {
        Err(error) => *error.downcast::<tonic::Status>().expect("a status"),
        Ok(_) => panic!("no attempt was answered"),
    };
    assert!(
        status.message().contains("not executed") && !status.message().contains("no provider"),
        "{status:?}"
    );
}
