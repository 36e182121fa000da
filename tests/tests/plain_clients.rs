//! Clients that know nothing of rpc lose nothing when a provider goes offline
//! gracefully (issue 12, rule 2): they read no closing mark and re-route no "not
//! executed" status, so the provider speaks HTTP/2's own language to them — a GOAWAY
//! early enough that they open no new stream on the connection, the listener closed so
//! that they do not dial it again, and REFUSED_STREAM (which gRPC clients retry by
//! themselves) for a stream that arrives anyway.
//!
//! The grpcio test needs `RPC_TEST_PYTHON` (a Python with grpcio and grpcio-tools;
//! `scripts/test.sh` sets it). Without it the test says it was skipped and why.

mod common;

use std::process::Stdio;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use rpc::Application;
use rpc::registry::MemoryHub;
use rpc_testkit::external::Need;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::{Instant, timeout};

/// The measured case of the issue: 300 calls/s of 200 ms each, over two providers.
const RATE: u32 = 300;
const WORK_MS: u32 = 200;
const SECONDS: u32 = 10;
/// Nothing in these tests may take longer.
const BOUND: Duration = Duration::from_secs(60);

/// Waits until `condition` holds, failing the test after [`BOUND`].
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What the Python client printed at the end.
#[derive(Debug, Default)]
struct Summary {
    sent: u64,
    failed: u64,
    lines: Vec<String>,
}

fn parse_summary(lines: Vec<String>) -> Summary {
    let mut summary = Summary::default();
    for line in &lines {
        for field in line.split_whitespace() {
            if let Some(value) = field.strip_prefix("sent=") {
                summary.sent = value.parse().unwrap_or_default();
            } else if let Some(value) = field.strip_prefix("failed=") {
                summary.failed = value.parse().unwrap_or_default();
            }
        }
    }
    summary.lines = lines;
    summary
}

/// grpcio, `round_robin` over two providers, 300 calls/s of 200 ms each; one provider
/// stops gracefully while the load runs. Every call succeeds, and the stopping
/// provider's report is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_round_robin_loses_nothing_when_a_provider_stops() {
    let Some(python) = Need::Python.get("grpcio_round_robin_loses_nothing_when_a_provider_stops")
    else {
        return;
    };
    let (_hub, leaving, staying) = two_providers().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/balanced_load.py");
    let mut client = Command::new(python)
        .arg(script)
        .arg(proto::PROTO_DIR)
        .args([RATE.to_string(), WORK_MS.to_string(), SECONDS.to_string()])
        .args([&leaving, &staying].map(address))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut stdout = BufReader::new(client.stdout.take().expect("piped")).lines();
    let started = timeout(BOUND, stdout.next_line()).await;
    assert_eq!(
        started.ok().and_then(Result::ok).flatten().as_deref(),
        Some("started")
    );
    let report = stop_under_load(&leaving, &staying).await;
    let mut lines = Vec::new();
    while let Ok(Some(line)) = timeout(BOUND, stdout.next_line())
        .await
        .expect("the client ends")
    {
        lines.push(line);
    }
    let _ = client.wait().await;
    let summary = parse_summary(lines);
    println!("leaving provider: {report}");
    println!("grpcio: {}", summary.lines.join("\n        "));
    assert_eq!(summary.sent, u64::from(RATE * SECONDS), "{summary:?}");
    assert_eq!(summary.failed, 0, "{summary:?}");
    assert_eq!(report.exit_code(), 0, "{report}");
    staying.before_shutdown().await;
}

/// What a watcher of the stopping provider's phase saw: each phase it read, and when.
/// A phase read at `t` held at `t`, so the latest reading of a phase before `phase`
/// is a moment at which `phase` had not begun yet.
#[derive(Clone, Default)]
struct Phases(std::sync::Arc<parking_lot::Mutex<Vec<(rpc::Phase, Instant)>>>);

impl Phases {
    /// Records every phase `app` goes through from now on.
    fn watch(app: &Application) -> Self {
        let phases = Self::default();
        let mut phase = app.watch_phase();
        let record = phases.clone();
        tokio::spawn(async move {
            loop {
                let now = *phase.borrow_and_update();
                record.0.lock().push((now, Instant::now()));
                if phase.changed().await.is_err() {
                    return;
                }
            }
        });
        phases
    }

    /// The latest moment seen before `phase` began (a lower bound of its beginning).
    fn not_yet(&self, phase: rpc::Phase) -> Instant {
        self.0
            .lock()
            .iter()
            .filter(|(seen, _)| *seen < phase)
            .map(|(_, at)| *at)
            .max()
            .expect("the phase before it was seen")
    }
}

/// One call of an open-loop run: when it left, and how it ended.
struct Sent {
    at: Instant,
    result: Result<(), tonic::Status>,
}

/// Sends `rate` echo calls/s of `WORK_MS` through `client` until `stop` is set,
/// whatever earlier calls do; returns every call once all have ended.
async fn open_loop<C>(
    client: C,
    rate: u32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<Sent>
where
    C: Fn() -> futures_util::future::BoxFuture<'static, Result<(), tonic::Status>>,
{
    let mut calls = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / rate);
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        ticker.tick().await;
        let at = Instant::now();
        let call = client();
        calls.spawn(async move {
            Sent {
                at,
                result: call.await,
            }
        });
    }
    let mut sent = Vec::new();
    while let Some(call) = calls.join_next().await {
        sent.push(call.expect("call task"));
    }
    sent
}

/// Where the calls of an open-loop run went wrong, split at the moment the stopping
/// provider's sequence ended (its process would exit there).
struct Split {
    before: usize,
    failed_before: usize,
    after: usize,
    failed_after: usize,
}

impl Split {
    fn of(sent: &[Sent], exited: Instant) -> Self {
        let (before, after): (Vec<&Sent>, Vec<&Sent>) = sent.iter().partition(|s| s.at < exited);
        let failed = |calls: &[&Sent]| calls.iter().filter(|s| s.result.is_err()).count();
        Self {
            failed_before: failed(&before),
            failed_after: failed(&after),
            before: before.len(),
            after: after.len(),
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "until the stop ended {} sent, {} failed; in the 2 s after it {} sent, {} failed",
            self.before, self.failed_before, self.after, self.failed_after
        )
    }
}

/// An echo call of [`WORK_MS`] through `client`, boxed for [`open_loop`].
fn echo_call<T>(
    client: &proto::echo::echo_client::EchoClient<T>,
) -> futures_util::future::BoxFuture<'static, Result<(), tonic::Status>>
where
    T: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    T::Future: Send,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
    T::Error: Into<tonic::codegen::StdError>,
{
    let mut client = client.clone();
    Box::pin(async move {
        client
            .echo(proto::echo::EchoRequest {
                payload: bytes::Bytes::from_static(b"load"),
                delay_ms: Some(WORK_MS),
            })
            .await
            .map(drop)
    })
}

/// Once both providers serve the load, lets it run two seconds (about 30 calls of
/// 200 ms in flight on each provider), then stops `leaving` and returns its report.
async fn stop_under_load(leaving: &Application, staying: &Application) -> rpc::ShutdownReport {
    until("both providers serve the load", || {
        [leaving, staying]
            .iter()
            .all(|app| app.lifecycle().inbound().current() > 5)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    timeout(BOUND, leaving.before_shutdown())
        .await
        .expect("the shutdown ends")
}

/// Two echo providers on one in-process registry: the one a test stops, the one that
/// stays.
async fn two_providers() -> (MemoryHub, Application, Application) {
    common::logs();
    let hub = MemoryHub::new();
    let leaving = common::echo_provider(&hub, 0, common::config("leaving")).await;
    let staying = common::echo_provider(&hub, 0, common::config("staying")).await;
    (hub, leaving, staying)
}

/// An open-loop run through a provider's stop: the stopping provider's report, every
/// call, when the stop ended, and the phases it went through.
struct Run {
    report: rpc::ShutdownReport,
    sent: Vec<Sent>,
    split: Split,
    phases: Phases,
}

/// Runs [`RATE`] calls/s through `call` over `leaving` and `staying`, stops `leaving`
/// two seconds in, and goes on for two seconds after its sequence ended.
async fn stop_one_under_load<F>(leaving: &Application, staying: &Application, call: F) -> Run
where
    F: Fn() -> futures_util::future::BoxFuture<'static, Result<(), tonic::Status>> + Send + 'static,
{
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let phases = Phases::watch(leaving);
    let load = tokio::spawn(open_loop(call, RATE, stop.clone()));
    let report = stop_under_load(leaving, staying).await;
    let exited = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let sent = timeout(BOUND, load)
        .await
        .expect("load ends")
        .expect("load task");
    let split = Split::of(&sent, exited);
    println!("leaving provider: {report}");
    Run {
        report,
        sent,
        split,
        phases,
    }
}

/// tonic's `Channel::balance_list` over the same two providers, same load. tonic's
/// channel loses calls no provider can save (docs/operations.md, "Clients that are not
/// rpc consumers"): it dials a closing provider again right after its GOAWAY and
/// calls on the new connection without waiting for SETTINGS, so it keeps calling
/// through the shutdown; it does not retry a refused stream (REFUSED_STREAM, which
/// gRPC's own clients retry by themselves); a call it dispatches on a connection that
/// already got GOAWAY fails ("operation was canceled" when the connection closed first,
/// INTERNAL "h2 protocol error" — h2's GoAway, NO_ERROR — when h2 refused to open the
/// stream: the INTERNAL error once seen here without a cause); and once the provider's
/// listener is closed, every call it sends to the address fails ("tcp connect error":
/// tonic's `Reconnect` reports a refused dial as a ready endpoint, grpc/grpc-rust#2839).
///
/// What the provider owes it: no other failure (no refusal as a status, no cut
/// stream), each of tonic's own failures in the part of the stop that can cause it —
/// a call on a GOAWAYed connection only once GOAWAYs began (step 2), a refused dial
/// only once the listener was closed (step 6) — and a report that counts each refusal
/// tonic saw as a loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tonic_balance_list_loses_what_its_channel_cannot_retry() {
    let (_hub, leaving, staying) = two_providers().await;
    let endpoints = [&leaving, &staying].map(|app| {
        tonic::transport::Endpoint::from_shared(format!("http://{}", address(app))).expect("uri")
    });
    let client = EchoClient::new(tonic::transport::Channel::balance_list(
        endpoints.into_iter(),
    ));
    let Run {
        report,
        sent,
        split,
        phases,
    } = stop_one_under_load(&leaving, &staying, move || echo_call(&client)).await;
    let goaways_began = phases.not_yet(rpc::Phase::WaitingForConsumers);
    let listener_closed = phases.not_yet(rpc::Phase::Destroying);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let mut early = Vec::new();
    for (at, status) in sent
        .iter()
        .filter_map(|s| Some((s.at, s.result.as_ref().err()?)))
    {
        let kind = format!("{:?}: {}", status.code(), status.message());
        let possible_from = match kind.as_str() {
            "Cancelled: operation was canceled" | "Internal: h2 protocol error: http2 error" => {
                Some(goaways_began)
            }
            "Unavailable: tcp connect error" => Some(listener_closed),
            _ => None,
        };
        if possible_from.is_some_and(|from| at < from) {
            early.push(format!(
                "{kind} (sent {:?} too early)",
                possible_from.unwrap() - at
            ));
        }
        *kinds.entry(kind).or_default() += 1;
    }
    println!("tonic balance_list: {split}");
    println!("tonic's failures: {kinds:?}");
    assert!(
        early.is_empty(),
        "failures before the stop could cause them: {early:?}"
    );
    let refused = kinds
        .remove("Unavailable: h2 protocol error: http2 error")
        .unwrap_or(0);
    kinds.remove("Cancelled: operation was canceled");
    kinds.remove("Internal: h2 protocol error: http2 error");
    kinds.remove("Unavailable: tcp connect error");
    assert!(kinds.is_empty(), "failures the provider caused: {kinds:?}");
    assert_eq!(refused, report.refused_streams, "{report}");
    assert_eq!(
        (report.inbound_left, report.streams_cut),
        (0, 0),
        "{report}"
    );
    assert_eq!(
        report.exit_code(),
        i32::from(refused > 0),
        "refusals tonic saw are losses, and nothing else is: {report}"
    );
    staying.before_shutdown().await;
}

/// tonic's `Channel::balance_channel`, with each endpoint removed once the provider's
/// health service says NOT_SERVING (shutdown step 1 on): the recipe docs/operations.md
/// gives for tonic clients. It stops choosing the provider before anything is closed,
/// so nothing fails, during the stop or after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tonic_balance_channel_fed_by_health_loses_nothing() {
    use tonic::transport::channel::Change;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let (_hub, leaving, staying) = two_providers().await;
    let (channel, changes) = tonic::transport::Channel::balance_channel::<String>(16);
    for app in [&leaving, &staying] {
        let uri = format!("http://{}", address(app));
        let endpoint = tonic::transport::Endpoint::from_shared(uri.clone()).expect("uri");
        changes
            .send(Change::Insert(uri.clone(), endpoint.clone()))
            .await
            .expect("balance takes it");
        let mut health = HealthClient::new(endpoint.connect().await.expect("health connects"));
        let mut watch = health
            .watch(HealthCheckRequest::default())
            .await
            .expect("watch")
            .into_inner();
        let changes = changes.clone();
        tokio::spawn(async move {
            while let Ok(Some(status)) = watch.message().await {
                if status.status != ServingStatus::Serving as i32 {
                    let _ = changes.send(Change::Remove(uri)).await;
                    return;
                }
            }
        });
    }
    let client = EchoClient::new(channel);
    let Run { report, split, .. } =
        stop_one_under_load(&leaving, &staying, move || echo_call(&client)).await;
    println!("tonic balance_channel, removal on NOT_SERVING: {split}");
    assert_eq!((split.failed_before, split.failed_after), (0, 0), "{split}");
    assert_eq!(report.exit_code(), 0, "{report}");
    staying.before_shutdown().await;
}

/// Our reference over the same static list of addresses (`static://A,B`: it never
/// hears from a registry that A left): nothing fails during the stop, nor after it,
/// where tonic's `balance_list` keeps dialling the dead address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_reference_over_a_static_list_loses_nothing() {
    let (_hub, leaving, staying) = two_providers().await;
    let mut config = common::config("consumer");
    config.registries.insert(
        "default".to_owned(),
        rpc::config::RegistryConfig::new(format!(
            "static://{},{}",
            address(&leaving),
            address(&staying)
        )),
    );
    let mut builder = Application::builder(config);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let consumer = builder.start().await.expect("consumer starts");
    let Run { report, split, .. } =
        stop_one_under_load(&leaving, &staying, move || echo_call(&client)).await;
    println!("our reference over static://A,B: {split}");
    println!("consumer: {:?}", consumer.references()[0].stats());
    assert_eq!((split.failed_before, split.failed_after), (0, 0), "{split}");
    assert_eq!(report.exit_code(), 0, "{report}");
    consumer.before_shutdown().await;
    staying.before_shutdown().await;
}

fn address(app: &Application) -> String {
    app.local_addr().expect("listens").to_string()
}
