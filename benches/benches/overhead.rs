//! Overhead of the whole rpc stack over plain tonic.
//!
//! Both sides serve the same echo service on loopback over one HTTP/2 connection:
//! - plain: tonic's `Server` and a tonic `Channel`;
//! - rpc: an `Application` provider (provider filters, health service) found through the
//!   in-process registry by an `Application` consumer (directory, P2C, failover,
//!   blacklist, consumer filters).
//!
//! They run alternately in this process, in back-to-back pairs, at 1, 16 and 64
//! concurrent calls (closed loop). Each stack's median run is printed, and the median of
//! the per-pair ratios (a pair shares the machine's conditions, so this resists noise
//! from other tenants). The last line is `overhead: qps_ratio=X p99_ratio=Y` for 16
//! concurrent calls.
//!
//! Environment: `OVERHEAD_MILLIS` per run (default 1500), `OVERHEAD_ROUNDS` pairs per
//! concurrency (default 7), `OVERHEAD_PROFILE=plain|rpc|rpc-client|rpc-server` to run
//! one configuration for 3 s at `OVERHEAD_PROFILE_CALLS` (default 16) calls for a
//! profiler, printing CPU time per request (`rpc-client`: our consumer against tonic's
//! server; `rpc-server`: tonic's client against our provider).

use std::sync::Arc;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::registry::MemoryHub;
use rpc::{Application, Config};
use rpc_benches::env_u64;
use rpc_testkit::measure::{Measured, latency_histogram, median};
use rpc_testkit::services::EchoProvider;
use std::future::Future;
use tokio::time::Instant;

const CONCURRENCY: [usize; 3] = [1, 16, 64];

fn request() -> EchoRequest {
    EchoRequest {
        payload: bytes::Bytes::from_static(&[7u8; 64]),
        delay_ms: None,
    }
}

/// `concurrency` tasks calling `call` in a loop for `duration`.
async fn drive<C, F>(call: C, concurrency: usize, duration: Duration) -> Measured
where
    C: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = latency_histogram();
            while Instant::now() < deadline {
                let sent = Instant::now();
                call().await;
                latencies
                    .record(sent.elapsed().as_micros().max(1) as u64)
                    .unwrap();
            }
            latencies
        }));
    }
    let mut all = latency_histogram();
    for task in tasks {
        all.add(task.await.unwrap()).unwrap();
    }
    Measured::new(&all, started.elapsed())
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

async fn ours() -> (EchoClient<rpc::ReferenceChannel>, Vec<Application>) {
    let hub = MemoryHub::new();
    let config = |name: &str| {
        let mut config = Config::default();
        config.application.name = name.to_owned();
        config.graceful_shutdown.internal_signal = false;
        config.admin.enabled = false;
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

#[tokio::main]
async fn main() {
    let seconds = Duration::from_millis(env_u64("OVERHEAD_MILLIS", 1_500));
    let rounds = env_u64("OVERHEAD_ROUNDS", 7) as usize;
    let plain_stub = plain().await;
    let (our_client, _apps) = ours().await;
    let plain = move || {
        let mut client = plain_stub.clone();
        async move {
            client.echo(request()).await.expect("plain echo succeeds");
        }
    };
    let ours = move || {
        let mut client = our_client.clone();
        async move {
            client.echo(request()).await.expect("rpc echo succeeds");
        }
    };
    if let Ok(stack) = std::env::var("OVERHEAD_PROFILE") {
        let seconds = Duration::from_secs(3);
        let profile_calls = env_u64("OVERHEAD_PROFILE_CALLS", 16) as usize;
        let cpu_before = cpu_time();
        let measured = match stack.as_str() {
            "plain" => drive(plain, profile_calls, seconds).await,
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
    // Warm both: connections, allocator, P2C estimates.
    drive(plain.clone(), 16, Duration::from_secs(1)).await;
    drive(ours.clone(), 16, Duration::from_secs(1)).await;

    println!(
        "{:>11} {:>6} {:>10} {:>9} {:>9}",
        "stack", "calls", "qps", "p50 µs", "p99 µs"
    );
    let mut last = (0.0, 0.0);
    for concurrency in CONCURRENCY {
        let mut plain_runs = Vec::new();
        let mut our_runs = Vec::new();
        // Pairs of back-to-back runs: a pair sees the same machine conditions, so
        // the median of the per-pair ratios resists noise from other tenants.
        let mut pair_ratios = Vec::new();
        for round in 0..rounds {
            let (plain_run, our_run) = if round % 2 == 0 {
                let plain_run = drive(plain.clone(), concurrency, seconds).await;
                (plain_run, drive(ours.clone(), concurrency, seconds).await)
            } else {
                let our_run = drive(ours.clone(), concurrency, seconds).await;
                (drive(plain.clone(), concurrency, seconds).await, our_run)
            };
            pair_ratios.push((
                our_run.qps / plain_run.qps,
                our_run.p50_us as f64 / plain_run.p50_us as f64,
                our_run.p99_us as f64 / plain_run.p99_us as f64,
            ));
            plain_runs.push(plain_run);
            our_runs.push(our_run);
        }
        let summarize = |runs: &[Measured]| {
            (
                median(&runs.iter().map(|m| m.qps).collect::<Vec<_>>()),
                median(&runs.iter().map(|m| m.p50_us as f64).collect::<Vec<_>>()),
                median(&runs.iter().map(|m| m.p99_us as f64).collect::<Vec<_>>()),
            )
        };
        let (plain_qps, plain_p50, plain_p99) = summarize(&plain_runs);
        let (our_qps, our_p50, our_p99) = summarize(&our_runs);
        println!(
            "{:>11} {concurrency:>6} {plain_qps:>10.0} {plain_p50:>9.0} {plain_p99:>9.0}",
            "plain tonic"
        );
        println!(
            "{:>11} {concurrency:>6} {our_qps:>10.0} {our_p50:>9.0} {our_p99:>9.0}",
            "rpc"
        );
        let qps_ratio = median(&pair_ratios.iter().map(|r| r.0).collect::<Vec<_>>());
        let p50_ratio = median(&pair_ratios.iter().map(|r| r.1).collect::<Vec<_>>());
        let p99_ratio = median(&pair_ratios.iter().map(|r| r.2).collect::<Vec<_>>());
        println!(
            "{:>11} {concurrency:>6} qps_ratio={qps_ratio:.3} p50_ratio={p50_ratio:.3} p99_ratio={p99_ratio:.3} (median of {rounds} paired runs)",
            "ratio"
        );
        if concurrency == 16 {
            last = (qps_ratio, p99_ratio);
        }
    }
    println!("overhead: qps_ratio={:.3} p99_ratio={:.3}", last.0, last.1);
}
