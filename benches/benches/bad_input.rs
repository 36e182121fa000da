//! What bad input on the wire costs a good client (issue 12, rule 5): one provider, one
//! consumer calling it at a steady rate, in three phases of the same process: alone;
//! while other connections send one round of every attack of `rpc_testkit::wire` ten
//! times a second (bytes that are not HTTP/2, malformed frames, a rapid-reset flood of
//! 5 000 streams, header-list and CONTINUATION floods, a message over the size limit);
//! and while they send rounds back to back, as fast as the attacker can. The attacker
//! shares the machine's cores (and this process) with the provider and the client, so
//! the last phase measures the attacker's own CPU as much as the provider's defences.
//! Target: the good client's p99 under attack within 2× its p99 alone, and no failed
//! call. Last line: `bad_input: p99_ratio_paced=X p99_ratio_flat_out=Y failed=N`.

use std::net::SocketAddr;
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
const PHASE: Duration = Duration::from_secs(6);
/// Rounds of attacks per second in the paced phase.
const PACED_ROUNDS: u32 = 10;
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
async fn attack_once(addr: SocketAddr) -> u64 {
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

/// How the attacker sends its rounds during a phase.
#[derive(Clone, Copy, Debug)]
enum Attack {
    None,
    /// One round every this long.
    Paced(Duration),
    /// Rounds back to back.
    FlatOut,
}

/// The good client's p99 (ms) and failures during one phase, and the attacks sent.
async fn phase(
    good: &TestServiceClient<rpc::ReferenceChannel>,
    addr: SocketAddr,
    attack: Attack,
) -> (f64, u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let attacks = Arc::new(AtomicU64::new(0));
    let attacker = {
        let (stop, attacks) = (stop.clone(), attacks.clone());
        tokio::spawn(async move {
            let pause = match attack {
                Attack::None => return,
                Attack::Paced(every) => Some(every),
                Attack::FlatOut => None,
            };
            let mut ticks = pause.map(tokio::time::interval);
            while !stop.load(Ordering::Relaxed) {
                if let Some(ticks) = &mut ticks {
                    ticks.tick().await;
                }
                attacks.fetch_add(attack_once(addr).await, Ordering::Relaxed);
            }
        })
    };
    let good = good.clone();
    let record = load::run(
        LoadOptions::new(RATE, PHASE),
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
        |_| {},
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let _ = attacker.await;
    let p99 = record.steady.value_at_quantile(0.99) as f64 / 1000.0;
    println!(
        "  {:<28} p99 {p99:>7.2} ms   calls {} failed {}   attacks {}",
        format!("{attack:?}"),
        record.sent,
        record.failed(),
        attacks.load(Ordering::Relaxed)
    );
    (p99, record.failed(), attacks.load(Ordering::Relaxed))
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

    println!(
        "good client at {RATE} req/s, {} s per phase (target: p99 under attack ≤ 2× alone)",
        PHASE.as_secs()
    );
    let (alone, failed_alone, _) = phase(&good, addr, Attack::None).await;
    let every = Duration::from_secs(1) / PACED_ROUNDS;
    let (paced, failed_paced, _) = phase(&good, addr, Attack::Paced(every)).await;
    let (flat_out, failed_flat_out, _) = phase(&good, addr, Attack::FlatOut).await;
    let ratio = |p99: f64| p99 / alone.max(0.001);
    println!(
        "bad_input: p99_ratio_paced={:.2} p99_ratio_flat_out={:.2} failed={}",
        ratio(paced),
        ratio(flat_out),
        failed_alone + failed_paced + failed_flat_out
    );
    consumer.before_shutdown().await;
    provider.before_shutdown().await;
}
