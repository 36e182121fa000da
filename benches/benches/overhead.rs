//! Overhead of the whole rpc stack over plain tonic.
//!
//! Both sides serve the same echo service on loopback over one HTTP/2 connection:
//! - plain: tonic's `Server` and a tonic `Channel`;
//! - rpc: an `Application` provider (provider filters, health service) found through the
//!   in-process registry by an `Application` consumer (directory, P2C, failover,
//!   blacklist, consumer filters).
//!
//! They run alternately in this process, several rounds, at 1, 16 and 64 concurrent
//! calls (closed loop); the median round of each is printed with the ratios. The last
//! line is `overhead: qps_ratio=X p99_ratio=Y` for 16 concurrent calls.
//! Environment: `OVERHEAD_SECONDS` per measured run (default 3), `OVERHEAD_ROUNDS`
//! (default 3), `OVERHEAD_PROFILE=rpc|plain` to run only that stack at 16 calls for a
//! profiler (no ratios).

use std::sync::Arc;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::EchoServer;
use rpc::registry::MemoryHub;
use rpc::{Application, Config};
use rpc_benches::{Measured, histogram, median};
use rpc_examples::services::EchoProvider;
use std::future::Future;
use tokio::time::Instant;

const CONCURRENCY: [usize; 3] = [1, 16, 64];

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

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
            let mut latencies = histogram();
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
    let mut all = histogram();
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
        config
    };
    let mut provider = Application::builder(config("provider"));
    provider.registry("default", Arc::new(hub.client()));
    provider.service(EchoServer::new(EchoProvider::default()));
    let provider = provider.start().await.unwrap();
    let mut consumer_config = config("consumer");
    if std::env::var("OVERHEAD_NO_TIMEOUT").is_ok() {
        consumer_config.consumer.references.insert(
            "echo.Echo".to_owned(),
            rpc::cluster::ReferenceConfig {
                timeout: None,
                ..Default::default()
            },
        );
    }
    let mut consumer = Application::builder(consumer_config);
    consumer.registry("default", Arc::new(hub.client()));
    let client = EchoClient::new(consumer.reference("echo.Echo"));
    let consumer = consumer.start().await.unwrap();
    (client, vec![consumer, provider])
}

/// CPU time this process has used (user + system), from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Fields 14 and 15 of the file (utime, stime), counted after the command name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let seconds = Duration::from_secs(env("OVERHEAD_SECONDS", 3));
        let rounds = env("OVERHEAD_ROUNDS", 3) as usize;
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
            let cpu_before = cpu_time();
            let measured = match stack.as_str() {
                "plain" => drive(plain, 16, seconds).await,
                "rpc-server" => {
                    // A plain tonic client against our provider.
                    let client = plain_client(_apps[1].local_addr().unwrap()).await;
                    let call = move || {
                        let mut client = client.clone();
                        async move {
                            client.echo(request()).await.expect("echo succeeds");
                        }
                    };
                    drive(call, 16, seconds).await
                }
                "rpc-client" => {
                    // Our consumer against a plain tonic server.
                    let addr = plain_server().await;
                    let mut builder = Application::builder(Config::default());
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
                    drive(call, 16, seconds).await
                }
                _ => drive(ours, 16, seconds).await,
            };
            let requests = measured.qps * seconds.as_secs_f64();
            let cpu_us = (cpu_time() - cpu_before).as_secs_f64() * 1e6 / requests;
            println!("{stack} alone at 16 calls: {measured:?}, CPU {cpu_us:.1} µs per request");
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
            for _ in 0..rounds {
                plain_runs.push(drive(plain.clone(), concurrency, seconds).await);
                our_runs.push(drive(ours.clone(), concurrency, seconds).await);
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
            let ratios = (our_qps / plain_qps, our_p99 / plain_p99);
            println!(
                "{:>11} {concurrency:>6} qps_ratio={:.3} p50_ratio={:.3} p99_ratio={:.3}",
                "ratio",
                ratios.0,
                our_p50 / plain_p50,
                ratios.1
            );
            if concurrency == 16 {
                last = ratios;
            }
        }
        println!("overhead: qps_ratio={:.3} p99_ratio={:.3}", last.0, last.1);
    });
}
