//! What bad input on the wire costs a good client (issue 12, rule 5): one provider, one
//! consumer calling it at a steady rate, first alone, then while other connections send
//! every attack of `rpc_testkit::wire` over and over (bytes that are not HTTP/2,
//! malformed frames, rapid-reset floods, header-list and CONTINUATION floods, a message
//! over the size limit). Both phases run in the same process, one after the other.
//! Target: the good client's p99 during the attacks within 2× its p99 without them, and
//! no failed call. Last line: `bad_input: p99_ratio=X failed=N attacks=N`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use proto::interop::SimpleRequest;
use proto::interop::test_service_client::TestServiceClient;
use rpc::registry::MemoryHub;
use rpc::{Application, ApplicationBuilder, Config};
use rpc_testkit::interop::server;
use rpc_testkit::load::{self, LoadOptions};
use rpc_testkit::wire::{self, Malformed, grpc};

const RATE: u32 = 1_000;
const PHASE: Duration = Duration::from_secs(8);
const UNARY: &str = "/grpc.testing.TestService/UnaryCall";

fn builder(name: &str, hub: &MemoryHub) -> ApplicationBuilder {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    config.application.logging = false;
    config.graceful_shutdown.internal_signal = false;
    config.admin.enabled = false;
    let mut builder = Application::builder(config);
    builder.registry("default", Arc::new(hub.client()));
    builder
}

/// Sends every attack once on its own connections; returns how many were sent.
async fn attack_once(addr: std::net::SocketAddr) -> u64 {
    let bound = Duration::from_secs(5);
    let _ = wire::send_raw(addr, &wire::not_http2(), bound).await;
    for malformed in Malformed::ALL {
        let _ = wire::send_raw(addr, &malformed.bytes(), bound).await;
    }
    let _ = wire::rapid_reset(addr, UNARY, 5_000, bound).await;
    let _ = wire::large_header_list(addr, UNARY, 20 << 10).await;
    let _ = wire::send_raw(addr, &wire::continuation_flood(1_000), bound).await;
    let _ = grpc::call(addr, UNARY, &[], grpc::framed(false, &[], Some(u32::MAX))).await;
    4 + Malformed::ALL.len() as u64
}

#[tokio::main]
async fn main() {
    let hub = MemoryHub::new();
    let mut provider = builder("provider", &hub);
    server::provide(&mut provider);
    let provider = provider.start().await.expect("provider starts");
    let addr = provider.local_addr().expect("listens");
    let mut consumer = builder("consumer", &hub);
    let good = TestServiceClient::new(consumer.reference("grpc.testing.TestService"));
    let consumer = consumer.start().await.expect("consumer starts");

    let stop = Arc::new(AtomicBool::new(false));
    let attacks = Arc::new(AtomicU64::new(0));
    let attacker = {
        let (stop, attacks) = (stop.clone(), attacks.clone());
        async move {
            // The first phase runs without attacks.
            tokio::time::sleep(PHASE).await;
            while !stop.load(Ordering::Relaxed) {
                attacks.fetch_add(attack_once(addr).await, Ordering::Relaxed);
            }
        }
    };
    let attacker = tokio::spawn(attacker);
    let record = load::run(
        LoadOptions::new(RATE, 2 * PHASE),
        move |_| {
            let mut client = good.clone();
            async move {
                let request = SimpleRequest {
                    response_size: 16,
                    ..Default::default()
                };
                client.unary_call(request).await.map(|_| String::new())
            }
        },
        |load| {
            tokio::spawn(async move {
                tokio::time::sleep(PHASE).await;
                load.set_restarting(true);
            });
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let _ = attacker.await;

    let p99 = |quantile: u64| quantile as f64 / 1000.0;
    let alone = p99(record.steady.value_at_quantile(0.99));
    let attacked = p99(record.during_restart.value_at_quantile(0.99));
    let ratio = attacked / alone.max(0.001);
    println!(
        "good client at {RATE} req/s, {} s alone then {} s under attack",
        PHASE.as_secs(),
        PHASE.as_secs()
    );
    println!("  p99 alone          {alone:>8.2} ms");
    println!("  p99 under attack   {attacked:>8.2} ms   (target ≤ 2× alone)");
    println!(
        "  calls {} failed {}; attacks sent {}",
        record.sent,
        record.failed(),
        attacks.load(Ordering::Relaxed)
    );
    println!(
        "bad_input: p99_ratio={ratio:.2} failed={} attacks={}",
        record.failed(),
        attacks.load(Ordering::Relaxed)
    );
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}
