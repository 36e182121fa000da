//! Streams that survive a deploy, in process, on the memory registry and on etcd:
//!
//! - a feed of 300 events, one every 100 ms, subscribed through a reference that declares
//!   `Subscribe` resumable (configuration only: the default rule), while every provider
//!   is rolled (a new one started and listed, then the old one stopped gracefully): the
//!   caller receives all 300 in order, no stream is cut, every stop is clean, and the
//!   stream moved at least once;
//! - a handler that ignores the notice is cut at the drain bound: the caller gets
//!   `UNAVAILABLE`, "provider shut down before the stream ended", and the stop is
//!   reported as cut, with exit code 1.
//!
//! etcd's URL comes from `RPC_TEST_ETCD_URL` (`scripts/test.sh` starts etcd); without it
//! the etcd test says it was skipped, and with `RPC_TEST_REQUIRE_REGISTRIES=1` (CI) it
//! fails instead. Every wait is on a condition and bounded.

mod common;

use std::time::Duration;

use common::backend::Backend;
use proto::feed::feed_client::FeedClient;
use proto::feed::feed_server::FeedServer;
use proto::feed::{Event, SubscribeRequest};
use rpc::cluster::ReferenceConfig;
use rpc::registry::MemoryHub;
use rpc::transport::CUT_AT_SHUTDOWN;
use rpc::{Application, ReferenceChannel, ShutdownReport};
use rpc_testkit::feed::FeedProvider;
use tokio::time::timeout;
use tonic::{Code, Status};

/// Events of the stream: 300, one every 100 ms (30 s).
const EVENTS: u64 = 300;
const INTERVAL_MS: u32 = 100;
/// Providers rolled.
const PROVIDERS: usize = 3;
/// No stream, start or stop of these tests may take longer: a hang fails the test.
const BOUND: Duration = Duration::from_secs(60);

/// A feed provider named `name` on `backend`, moving its streams or not; its drain steps
/// are bounded by `drain_bound`.
async fn provider(
    backend: &Backend,
    name: &str,
    feed: FeedProvider,
    drain_bound: Duration,
) -> Application {
    let mut config = common::config(name);
    config.graceful_shutdown.step_timeout = drain_bound;
    config.graceful_shutdown.consumer_update_wait_time = Duration::from_secs(2);
    config.graceful_shutdown.offline_request_window_timeout = Duration::from_millis(200);
    let mut builder = backend.builder(config);
    builder.service(FeedServer::new(feed));
    timeout(BOUND, builder.start())
        .await
        .expect("bounded")
        .expect("provider starts")
}

/// A consumer whose reference to `feed.Feed` declares `Subscribe` resumable.
async fn consumer(backend: &Backend) -> (Application, FeedClient<ReferenceChannel>) {
    let mut config = common::config("feed-consumer");
    let mut reference = ReferenceConfig::default();
    reference
        .methods
        .entry("Subscribe".to_owned())
        .or_default()
        .resumable = true;
    config
        .consumer
        .references
        .insert("feed.Feed".to_owned(), reference);
    let mut builder = backend.builder(config);
    let client = FeedClient::new(builder.reference("feed.Feed"));
    let app = timeout(BOUND, builder.start())
        .await
        .expect("bounded")
        .expect("consumer starts");
    (app, client)
}

/// Waits until the consumer's reference lists `count` instances.
async fn until_listed(consumer: &Application, count: usize) {
    let directory = consumer.references()[0].directory().clone();
    timeout(BOUND, async {
        while directory.list().len() != count {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the consumer lists {count} instances within {BOUND:?}"));
}

/// The events of one subscription, and how it ended.
async fn subscribe(mut client: FeedClient<ReferenceChannel>) -> (Vec<Event>, Result<(), Status>) {
    let request = SubscribeRequest {
        from: 0,
        until: EVENTS,
        interval_ms: INTERVAL_MS,
    };
    let mut events = Vec::new();
    let mut stream = match client.subscribe(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return (events, Err(status)),
    };
    loop {
        match stream.message().await {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, Ok(())),
            Err(status) => return (events, Err(status)),
        }
    }
}

/// Two feed providers, `feed-a` and `feed-b`, that move their streams.
async fn two_providers(backend: &Backend) -> (Application, Application) {
    let drain = Duration::from_secs(5);
    let a = provider(backend, "feed-a", FeedProvider::moving("feed-a"), drain).await;
    let b = provider(backend, "feed-b", FeedProvider::moving("feed-b"), drain).await;
    (a, b)
}

/// A subscription to events `0..until`, opened.
async fn open(client: &mut FeedClient<ReferenceChannel>, until: u64) -> tonic::Streaming<Event> {
    let request = SubscribeRequest {
        from: 0,
        until,
        interval_ms: INTERVAL_MS,
    };
    client
        .subscribe(request)
        .await
        .expect("subscribed")
        .into_inner()
}

/// Stops `app` gracefully, bounded, and returns its report.
async fn stop(app: &Application) -> ShutdownReport {
    timeout(BOUND, app.before_shutdown())
        .await
        .expect("the stop is bounded")
}

async fn a_stream_moves_through_a_rolling_restart(backend: Backend) {
    let drain = Duration::from_secs(5);
    let mut providers = Vec::new();
    for n in 0..PROVIDERS {
        let name = format!("feed-{n}");
        providers.push(provider(&backend, &name, FeedProvider::moving(name.clone()), drain).await);
    }
    let (consumer, client) = consumer(&backend).await;
    until_listed(&consumer, PROVIDERS).await;
    let stream = tokio::spawn(timeout(BOUND, subscribe(client)));
    // Every provider rolled once the stream is under way: a new one first, listed, then
    // the old one stopped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut reports = Vec::new();
    for (n, slot) in providers.iter_mut().enumerate() {
        let name = format!("feed-{n}-new");
        let new = provider(&backend, &name, FeedProvider::moving(name.clone()), drain).await;
        until_listed(&consumer, PROVIDERS + 1).await;
        let old = std::mem::replace(slot, new);
        reports.push(stop(&old).await);
        until_listed(&consumer, PROVIDERS).await;
    }
    let (events, end) = stream
        .await
        .unwrap()
        .expect("the stream ends within the bound");
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert!(end.is_ok(), "after {} events: {end:?}", seqs.len());
    assert_eq!(
        seqs,
        (0..EVENTS).collect::<Vec<_>>(),
        "every event once, in order"
    );
    let servers: Vec<&str> = events.iter().map(|event| event.provider.as_str()).collect();
    let moves = servers.windows(2).filter(|pair| pair[0] != pair[1]).count();
    let moved: usize = reports.iter().map(|report| report.streams_moved).sum();
    let resumed = consumer.resumed_streams();
    println!(
        "events {} of {EVENTS}, served by {} providers in turn, {moved} moved by providers, consumer: {resumed:?}",
        seqs.len(),
        moves + 1
    );
    for report in &reports {
        println!("stop: {report}");
        assert_eq!(report.streams_cut, 0, "{report}");
        assert_eq!(report.exit_code(), 0, "{report}");
    }
    assert!(
        moves >= 1 && moved >= 1,
        "the stream moved: {moves} changes of provider, {moved} moved"
    );
    assert_eq!(resumed.resumed, resumed.moved, "{resumed:?}");
    assert_eq!(resumed.not_resumed, 0, "{resumed:?}");
    stop(&consumer).await;
    for provider in &providers {
        stop(provider).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_300_events_moves_through_a_rolling_restart_memory() {
    a_stream_moves_through_a_rolling_restart(Backend::Memory(MemoryHub::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_300_events_moves_through_a_rolling_restart_etcd() {
    if let Some(backend) = Backend::etcd("stream-resume-roll") {
        a_stream_moves_through_a_rolling_restart(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_ignores_the_notice_is_cut_at_the_drain_bound() {
    let backend = Backend::Memory(MemoryHub::new());
    let ignoring = provider(
        &backend,
        "feed-ignoring",
        FeedProvider::ignoring("feed-ignoring"),
        Duration::from_secs(1),
    )
    .await;
    let (consumer, client) = consumer(&backend).await;
    until_listed(&consumer, 1).await;
    let stream = tokio::spawn(timeout(BOUND, subscribe(client)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = stop(&ignoring).await;
    let (events, end) = stream
        .await
        .unwrap()
        .expect("the stream ends within the bound");
    println!("events {}, stop: {report}", events.len());
    let status = end.expect_err("the stream is cut");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), CUT_AT_SHUTDOWN);
    assert!(!events.is_empty() && events.len() < EVENTS as usize);
    assert_eq!(report.streams_cut, 1, "{report}");
    assert_eq!(report.streams_moved, 0, "{report}");
    assert!(report.forced());
    assert_eq!(report.exit_code(), 1);
    assert_eq!(consumer.resumed_streams().moved, 0);
    stop(&consumer).await;
}

/// A plain gRPC client of another language — Python's grpcio — follows the same rule
/// (`tests/python/feed_resume_client.py`): its stream on A ends as moved when A stops,
/// and it subscribes again on B from the `resume-from` trailer. Needs `RPC_TEST_PYTHON`
/// (`scripts/test.sh` sets it; skipped without it unless required).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpcio_client_resumes_from_the_trailers_on_another_provider() {
    use tokio::io::AsyncBufReadExt;
    let Some(python) = rpc_testkit::external::Need::Python.get("a_grpcio_client_resumes") else {
        return;
    };
    let backend = Backend::Memory(MemoryHub::new());
    let (a, b) = two_providers(&backend).await;
    let targets = format!("{},{}", a.local_addr().unwrap(), b.local_addr().unwrap());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/feed_resume_client.py");
    let mut child = tokio::process::Command::new(python)
        .args([script, proto::PROTO_DIR, &targets, "30"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut stopping = None;
    // A stops once the client has had 5 events from it.
    let read = timeout(BOUND, async {
        while let Some(line) = lines.next_line().await.expect("stdout") {
            println!("python: {line}");
            if line == "event 4 from feed-a" {
                stopping = Some(tokio::spawn(a.before_shutdown()));
            }
            seen.push(line);
        }
    });
    read.await.expect("the python client ends within the bound");
    let stopping = stopping.expect("A was stopped");
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{seen:?}");
    assert!(
        seen.contains(&"received 30 events in order, moved 1 times".to_owned()),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|line| line.ends_with("from feed-b")),
        "{seen:?}"
    );
    let report = timeout(BOUND, stopping)
        .await
        .expect("A's stop is bounded")
        .unwrap();
    assert_eq!(
        (report.streams_moved, report.streams_cut),
        (1, 0),
        "{report}"
    );
    stop(&b).await;
}

/// A rule given in code over the generated types (`rpc::stream::typed`) derives the
/// re-opened request from the last event: asked once per move, and the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_rule_in_code_derives_the_next_request_from_the_last_event() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let backend = Backend::Memory(MemoryHub::new());
    let (a, b) = two_providers(&backend).await;
    let mut builder = backend.builder(common::config("typed-consumer"));
    let asked = Arc::new(AtomicU64::new(0));
    let counter = asked.clone();
    builder.resume_rule(
        "feed.Feed",
        "Subscribe",
        rpc::stream::typed(
            move |request: &SubscribeRequest,
                  last: Option<&Event>,
                  _: &tonic::metadata::MetadataMap| {
                counter.fetch_add(1, Ordering::Relaxed);
                Some(SubscribeRequest {
                    from: last.map_or(request.from, |event| event.seq + 1),
                    ..*request
                })
            },
        ),
    );
    let mut client = FeedClient::new(builder.reference("feed.Feed"));
    let consumer = builder.start().await.expect("consumer starts");
    until_listed(&consumer, 2).await;
    let mut stream = open(&mut client, 40).await;
    let mut events = Vec::new();
    let mut stopping = None;
    timeout(BOUND, async {
        while let Some(event) = stream.message().await.expect("no error") {
            if event.seq == 5 {
                // The provider serving the stream stops.
                let serving = if event.provider == "feed-a" { &a } else { &b };
                stopping = Some(tokio::spawn(serving.before_shutdown()));
            }
            events.push(event);
        }
    })
    .await
    .expect("the stream ends within the bound");
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (0..40).collect::<Vec<_>>());
    let report = stopping.expect("stopped").await.unwrap();
    assert_eq!(
        (report.streams_moved, report.streams_cut),
        (1, 0),
        "{report}"
    );
    assert_eq!(asked.load(Ordering::Relaxed), 1, "the rule was asked once");
    assert_eq!(consumer.resumed_streams().resumed, 1);
    stop(&consumer).await;
    for app in [&a, &b] {
        if app.phase() < rpc::Phase::Stopped {
            stop(app).await;
        }
    }
}

/// A manual offline of the service (`POST /offline`, here `Lifecycle::offline`) tells its
/// streams too: the stream moves to the other provider while the first keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_offline_moves_the_services_streams() {
    let backend = Backend::Memory(MemoryHub::new());
    let (a, b) = two_providers(&backend).await;
    let (consumer, mut client) = consumer(&backend).await;
    until_listed(&consumer, 2).await;
    let mut stream = open(&mut client, 30).await;
    let mut events = Vec::new();
    let mut offline = None;
    timeout(BOUND, async {
        while let Some(event) = stream.message().await.expect("no error") {
            if event.seq == 5 {
                offline = Some(if event.provider == "feed-a" { &a } else { &b });
                let changes = offline.unwrap().lifecycle().offline(|_| true).await;
                assert!(changes.is_ok(), "{changes:?}");
            }
            events.push(event);
        }
    })
    .await
    .expect("the stream ends within the bound");
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (0..30).collect::<Vec<_>>());
    let offline = offline.expect("a provider went offline");
    assert_eq!(offline.streams_moved(), 1);
    assert_eq!(offline.phase(), rpc::Phase::Serving, "offline, not stopped");
    let last = events.last().unwrap();
    assert_ne!(last.provider, offline.lifecycle().name(), "moved away");
    stop(&consumer).await;
    stop(&a).await;
    stop(&b).await;
}
