//! The only instance restarting loses nothing. A closing instance is avoided, not
//! forbidden (issue 12, rule 9): the registry removes it at shutdown step 1 and the
//! consumer has no instance left — yet the provider still serves until step 3, so the
//! consumer keeps sending to it. Once it refuses, and until its successor is listed, a
//! call finds no instance to send to and waits for one (`wait_for_provider`, gRPC's
//! wait-for-ready): at 100 calls/s, 0 fail.

mod common;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::Phase;
use rpc::registry::MemoryHub;
use tokio::time::{Instant, timeout};

/// The load of the case: 100 calls/s.
const RATE: u32 = 100;
/// Nothing in this test may take longer.
const BOUND: Duration = Duration::from_secs(30);

/// One call: the phase of the stopping provider when it was sent and when it
/// ended, and how it ended.
struct Sent {
    phase: Phase,
    ended_in: Phase,
    result: Result<(), tonic::Status>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_call_fails_while_the_only_provider_restarts() {
    common::logs();
    let hub = MemoryHub::new();
    let old = common::echo_provider(&hub, 0, common::config("provider")).await;
    let mut builder = common::builder("consumer", &hub, Duration::ZERO);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let consumer = builder.start().await.expect("consumer starts");

    let calls = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = tokio::spawn({
        let (calls, stop, lifecycle) = (calls.clone(), stop.clone(), old.lifecycle().clone());
        async move {
            let mut tasks = tokio::task::JoinSet::new();
            let mut ticker = tokio::time::interval(Duration::from_secs(1) / RATE);
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                ticker.tick().await;
                let (mut client, calls) = (client.clone(), calls.clone());
                let lifecycle = lifecycle.clone();
                let phase = lifecycle.phase();
                tasks.spawn(async move {
                    let result = client
                        .echo(EchoRequest {
                            payload: bytes::Bytes::from_static(b"x"),
                            delay_ms: None,
                        })
                        .await
                        .map(drop);
                    let ended_in = lifecycle.phase();
                    calls.lock().push(Sent {
                        phase,
                        ended_in,
                        result,
                    });
                });
            }
            while tasks.join_next().await.is_some() {}
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The restart: the old process stops, then the new one starts and registers.
    let report = timeout(BOUND, old.before_shutdown())
        .await
        .expect("the old provider stops");
    let restarted_at = Instant::now();
    let new = common::echo_provider(&hub, 0, common::config("provider")).await;
    let directory = consumer.references()[0].directory().clone();
    let deadline = Instant::now() + BOUND;
    while directory.list().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the consumer hears of the new provider"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "the new provider was listed {} ms after the old one stopped",
        restarted_at.elapsed().as_millis()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    timeout(BOUND, load)
        .await
        .expect("load ends")
        .expect("load task");

    let calls = std::mem::take(&mut *calls.lock());
    let no_provider = |sent: &&Sent| {
        sent.result
            .as_ref()
            .is_err_and(|status| status.message().contains("no provider"))
    };
    let mut by_phase = std::collections::BTreeMap::<Phase, (usize, usize, usize)>::new();
    for sent in &calls {
        let entry = by_phase.entry(sent.phase).or_default();
        entry.0 += 1;
        entry.1 += usize::from(sent.result.is_err());
        entry.2 += usize::from(no_provider(&sent));
    }
    println!("old provider: {report}");
    for (phase, (sent, failed, no_provider)) in &by_phase {
        println!(
            "sent while the old provider was {phase}: {sent} calls, {failed} failed, {no_provider} with no provider"
        );
    }
    println!("consumer: {:?}", consumer.references()[0].stats());
    let waiting: Vec<_> = calls
        .iter()
        .filter(|sent| {
            matches!(
                sent.phase,
                Phase::Unregistering | Phase::WaitingForConsumers
            )
        })
        .collect();
    assert!(
        waiting.len() >= 40,
        "the wait step saw the load: {}",
        waiting.len()
    );
    // Nothing fails: a call sent during the wait goes to the removed provider (kept as a
    // last resort) and is served; one that reaches it once it refuses (step 3 on), or
    // finds no instance at all, waits for its successor (`wait_for_provider`, 3 s by
    // default) — the refused request was not executed, so it may go anywhere.
    let failed: Vec<_> = calls
        .iter()
        .filter(|sent| sent.result.is_err())
        .map(|sent| {
            format!(
                "sent in {:?}, ended in {:?}: {:?}",
                sent.phase, sent.ended_in, sent.result
            )
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed through the restart: {failed:?}",
        failed.len(),
        calls.len()
    );
    // How many calls waited is printed above, not asserted: only a call whose *pick*
    // falls between the old provider's refusal and its successor's listing waits, and
    // that gap is a few milliseconds (2 ms in a CI run where a call sent 1 ms before the
    // listing was picked after it, and rightly did not wait). Without the wait, those
    // calls fail, which the assertion above catches (803 of 4 000 in rolling-deploy
    // --max-surge 0 before `wait_for_provider`).
    assert_eq!(report.exit_code(), 0, "{report}");
    consumer.before_shutdown().await;
    new.before_shutdown().await;
}
