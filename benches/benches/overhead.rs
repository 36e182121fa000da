//! Overhead of the whole rpc stack over plain tonic, and of its metrics and traces.
//!
//! Every stack serves the same echo service on loopback over one HTTP/2 connection:
//! - plain: tonic's `Server` and a tonic `Channel`;
//! - rpc: an `Application` provider (provider filters, health service) found through the
//!   in-process registry by an `Application` consumer (directory, P2C, failover,
//!   blacklist, consumer filters), with metrics and tracing on (the default);
//! - rpc-off: the same with `metrics.enabled` and `tracing.enabled` false.
//!
//! "Tracing on" is measured as a service runs it in production: a subscriber installed
//! for the whole run logs at INFO (to nowhere), so the DEBUG call and attempt spans are
//! built only as far as the span macros' interest check. Metrics on means every call is
//! timed on both sides and every attempt once more.
//!
//! They run alternately in this process, in back-to-back triples (the order rotates),
//! at 1, 16 and 64 concurrent calls (closed loop). Each stack's median run is printed,
//! and the medians of the per-triple ratios (a triple shares the machine's conditions,
//! so this resists noise from other tenants): rpc against plain, and rpc against
//! rpc-off. The last two lines are `overhead: qps_ratio=X p99_ratio=Y` (rpc / plain)
//! and `observability: qps_ratio=X p99_ratio=Y` (metrics and tracing on / off), both for
//! 16 concurrent calls.
//!
//! Environment: `OVERHEAD_MILLIS` per run (default 1500), `OVERHEAD_ROUNDS` triples per
//! concurrency (default 7), `OVERHEAD_PROFILE=plain|rpc|rpc-off|rpc-client|rpc-server`
//! to run one configuration for 3 s at `OVERHEAD_PROFILE_CALLS` (default 16) calls for a
//! profiler, printing CPU time per request (`rpc-client`: our consumer against tonic's
//! server; `rpc-server`: tonic's client against our provider). `OVERHEAD_LIMIT=on` runs
//! the rpc providers with the adaptive concurrency limit (`provider.limit`).

use std::sync::Arc;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::registry::MemoryHub;
use rpc::{Application, Config};
use rpc_benches::{drive, env_u64};
use rpc_testkit::measure::{Measured, median};
use rpc_testkit::services::EchoProvider;
use std::future::Future;

const CONCURRENCY: [usize; 3] = [1, 16, 64];

fn request() -> EchoRequest {
    EchoRequest {
        payload: bytes::Bytes::from_static(&[7u8; 64]),
        delay_ms: None,
    }
}

async fn plain() -> EchoClient<tonic::transport::Channel> {
    plain_client(plain_server().await).await
}

async fn plain_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(EchoServer::new(EchoProvider::default()))
            .serve_with_incoming(incoming),
    );
    addr
}

async fn plain_client(addr: std::net::SocketAddr) -> EchoClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .tcp_nodelay(true)
        .connect()
        .await
        .unwrap();
    EchoClient::new(channel)
}

/// A provider and a consumer on an in-process registry, with metrics and tracing on or
/// off on both.
async fn ours(observed: bool) -> (EchoClient<rpc::ReferenceChannel>, Vec<Application>) {
    let hub = MemoryHub::new();
    let config = |name: &str| {
        let mut config = Config::default();
        config.application.name = name.to_owned();
        config.graceful_shutdown.internal_signal = false;
        config.admin.enabled = false;
        config.metrics.enabled = observed;
        config.tracing.enabled = observed;
        // `OVERHEAD_LIMIT=on`: the provider's adaptive concurrency limit (off by default).
        config.provider.limit.enabled = std::env::var("OVERHEAD_LIMIT").is_ok_and(|v| v == "on");
        config
    };
    let mut provider = Application::builder(config("provider"));
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();
    let consumer_config = config("consumer");
    let mut consumer = Application::builder(consumer_config);
    consumer.registry("default", Arc::new(hub.client()));
    let client = EchoClient::new(consumer.reference("echo.Echo"));
    let consumer = consumer.start().await.unwrap();
    (client, vec![consumer, provider])
}

/// CPU time this process has used (user + system), from getrusage(2).
fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let micros = |time: nix::sys::time::TimeVal| {
        Duration::from_secs(time.tv_sec() as u64) + Duration::from_micros(time.tv_usec() as u64)
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// The median run of each stack and the medians of the per-triple ratios, for one
/// concurrency.
struct Row {
    plain: Measured,
    on: Measured,
    off: Measured,
    /// rpc / plain: (qps, p50, p99).
    over_plain: (f64, f64, f64),
    /// rpc / rpc-off: (qps, p50, p99).
    on_over_off: (f64, f64, f64),
}

/// `(qps, p50, p99)` of `a` divided by those of `b`.
fn ratios(a: &Measured, b: &Measured) -> (f64, f64, f64) {
    (
        a.qps / b.qps,
        a.p50_us as f64 / b.p50_us as f64,
        a.p99_us as f64 / b.p99_us as f64,
    )
}

/// The median of each of the three figures.
fn median_of(triples: &[(f64, f64, f64)]) -> (f64, f64, f64) {
    let each =
        |pick: fn(&(f64, f64, f64)) -> f64| median(&triples.iter().map(pick).collect::<Vec<_>>());
    (each(|t| t.0), each(|t| t.1), each(|t| t.2))
}

/// The median of each figure of `runs` (each on its own, as a summary row).
fn median_run(runs: &[Measured]) -> Measured {
    let each = |pick: fn(&Measured) -> f64| median(&runs.iter().map(pick).collect::<Vec<_>>());
    Measured {
        qps: each(|m| m.qps),
        p50_us: each(|m| m.p50_us as f64) as u64,
        p99_us: each(|m| m.p99_us as f64) as u64,
    }
}

/// `rounds` back-to-back triples of runs at `concurrency`, the order rotating.
async fn row<P, O, F>(
    plain: P,
    on: O,
    off: F,
    concurrency: usize,
    seconds: Duration,
    rounds: usize,
) -> Row
where
    P: Fn() -> BoxedCall + Clone + Send + 'static,
    O: Fn() -> BoxedCall + Clone + Send + 'static,
    F: Fn() -> BoxedCall + Clone + Send + 'static,
{
    let mut runs: [Vec<Measured>; 3] = Default::default();
    let (mut over_plain, mut on_over_off) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut triple: [Option<Measured>; 3] = Default::default();
        for slot in (0..3).map(|k| (round + k) % 3) {
            triple[slot] = Some(match slot {
                0 => drive(plain.clone(), concurrency, seconds).await,
                1 => drive(on.clone(), concurrency, seconds).await,
                _ => drive(off.clone(), concurrency, seconds).await,
            });
        }
        let [Some(p), Some(n), Some(f)] = triple else {
            unreachable!("every slot of a triple runs")
        };
        over_plain.push(ratios(&n, &p));
        on_over_off.push(ratios(&n, &f));
        for (all, run) in runs.iter_mut().zip([p, n, f]) {
            all.push(run);
        }
    }
    Row {
        plain: median_run(&runs[0]),
        on: median_run(&runs[1]),
        off: median_run(&runs[2]),
        over_plain: median_of(&over_plain),
        on_over_off: median_of(&on_over_off),
    }
}

/// One call of a stack, boxed so the three stacks share one type.
type BoxedCall = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

#[tokio::main]
async fn main() {
    // What "tracing on" means here (see the module docs): a subscriber that logs at INFO.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::sink)
        .init();
    let seconds = Duration::from_millis(env_u64("OVERHEAD_MILLIS", 1_500));
    let rounds = env_u64("OVERHEAD_ROUNDS", 7) as usize;
    let plain_stub = plain().await;
    let (our_client, _apps) = ours(true).await;
    let (quiet_client, _quiet_apps) = ours(false).await;
    let plain = move || -> BoxedCall {
        let mut client = plain_stub.clone();
        Box::pin(async move {
            client.echo(request()).await.expect("plain echo succeeds");
        })
    };
    let ours = move || -> BoxedCall {
        let mut client = our_client.clone();
        Box::pin(async move {
            client.echo(request()).await.expect("rpc echo succeeds");
        })
    };
    let quiet = move || -> BoxedCall {
        let mut client = quiet_client.clone();
        Box::pin(async move {
            client.echo(request()).await.expect("rpc-off echo succeeds");
        })
    };
    if let Ok(stack) = std::env::var("OVERHEAD_PROFILE") {
        let seconds = Duration::from_secs(3);
        let profile_calls = env_u64("OVERHEAD_PROFILE_CALLS", 16) as usize;
        let cpu_before = cpu_time();
        let measured = match stack.as_str() {
            "plain" => drive(plain, profile_calls, seconds).await,
            "rpc-off" => drive(quiet, profile_calls, seconds).await,
            "rpc-server" => {
                // A plain tonic client against our provider.
                let client = plain_client(_apps[1].local_addr().unwrap()).await;
                let call = move || {
                    let mut client = client.clone();
                    async move {
                        client.echo(request()).await.expect("echo succeeds");
                    }
                };
                drive(call, profile_calls, seconds).await
            }
            "rpc-client" => {
                // Our consumer against a plain tonic server.
                let addr = plain_server().await;
                let mut config = Config::default();
                config.admin.enabled = false;
                let mut builder = Application::builder(config);
                builder.registry(
                    "default",
                    Arc::new(rpc::registry::StaticRegistry::new(vec![(
                        addr.ip().to_string(),
                        addr.port(),
                    )])),
                );
                let client = EchoClient::new(builder.reference("echo.Echo"));
                let _app = builder.start().await.unwrap();
                let call = move || {
                    let mut client = client.clone();
                    async move {
                        client.echo(request()).await.expect("echo succeeds");
                    }
                };
                drive(call, profile_calls, seconds).await
            }
            _ => drive(ours, profile_calls, seconds).await,
        };
        let requests = measured.qps * seconds.as_secs_f64();
        let cpu_us = (cpu_time() - cpu_before).as_secs_f64() * 1e6 / requests;
        println!(
            "{stack} alone at {profile_calls} calls: {measured:?}, CPU {cpu_us:.1} µs per request"
        );
        return;
    }
    // Warm all three: connections, allocator, P2C estimates, every method's series.
    drive(plain.clone(), 16, Duration::from_secs(1)).await;
    drive(ours.clone(), 16, Duration::from_secs(1)).await;
    drive(quiet.clone(), 16, Duration::from_secs(1)).await;

    println!(
        "{:>11} {:>6} {:>10} {:>9} {:>9}",
        "stack", "calls", "qps", "p50 µs", "p99 µs"
    );
    let mut at_16 = None;
    for concurrency in CONCURRENCY {
        let row = row(
            plain.clone(),
            ours.clone(),
            quiet.clone(),
            concurrency,
            seconds,
            rounds,
        )
        .await;
        for (name, run) in [
            ("plain tonic", &row.plain),
            ("rpc", &row.on),
            ("rpc-off", &row.off),
        ] {
            println!(
                "{name:>11} {concurrency:>6} {:>10.0} {:>9} {:>9}",
                run.qps, run.p50_us, run.p99_us
            );
        }
        for (name, (qps, p50, p99)) in [
            ("rpc/plain", row.over_plain),
            ("rpc/rpc-off", row.on_over_off),
        ] {
            println!(
                "{name:>11} {concurrency:>6} qps_ratio={qps:.3} p50_ratio={p50:.3} p99_ratio={p99:.3} (median of {rounds} triples)"
            );
        }
        if concurrency == 16 {
            at_16 = Some((row.over_plain, row.on_over_off));
        }
    }
    if let Some((over_plain, on_over_off)) = at_16 {
        println!(
            "overhead: qps_ratio={:.3} p99_ratio={:.3}",
            over_plain.0, over_plain.2
        );
        println!(
            "observability: qps_ratio={:.3} p99_ratio={:.3}",
            on_over_off.0, on_over_off.2
        );
    }
}
